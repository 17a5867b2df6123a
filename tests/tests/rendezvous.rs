//! The rendezvous of ranks a launcher started, across processes on the loopback address: each
//! child process is one rank, as torchrun, srun or mpirun would start it, and gets NCCL's id
//! (a made-up one: no GPU is needed to meet) from rank 0, over TCP or through a file.
use std::io::{Read as _, Write as _};
use std::net::TcpStream;
use std::process::{Child, Command, ExitCode, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context as _, ensure};
use ferrocuda::multi::nccl::UniqueId;
use ferrocuda::multi::rendezvous::{Launch, Place, run_token, share_id};
use libtest_mimic::{Arguments, Trial};

/// Set in a child's environment: it is a rank, with this limit in milliseconds.
const CHILD: &str = "FERROCUDA_TEST_RENDEZVOUS_MS";

/// Set in a child's environment: before meeting, it tries the TCP address once itself and
/// prints `tried: ` and what came of it, so that the test knows it came before rank 0.
const MARK: &str = "FERROCUDA_TEST_RENDEZVOUS_MARK";

/// Set in a child's environment: as rank 0, it cannot make the id.
const NO_ID: &str = "FERROCUDA_TEST_RENDEZVOUS_NO_ID";

/// The id rank 0 hands out: every byte 0x5a.
const ID: UniqueId = UniqueId([0x5a; 128]);

fn main() -> ExitCode {
    if let Ok(ms) = std::env::var(CHILD) {
        return child(ms.parse().unwrap_or(5000));
    }
    let trial = |name: &str, test: fn() -> anyhow::Result<()>| {
        Trial::test(name, move || test().map_err(|e| format!("{e:#}").into()))
    };
    let trials = vec![
        trial(
            "torchrun_style_ranks_meet_over_tcp_even_when_rank_0_comes_last",
            ranks_meet_over_tcp,
        ),
        trial(
            "slurm_and_open_mpi_style_ranks_meet_at_a_named_address",
            other_launchers,
        ),
        // Counted as skipped, by name, where the loopback address has no IPv6.
        match std::net::TcpListener::bind("[::1]:0") {
            Ok(_) => trial("ranks_meet_over_the_ipv6_loopback_address", ipv6),
            Err(e) => {
                eprintln!(
                    "SKIPPED ranks_meet_over_the_ipv6_loopback_address: ::1 cannot be bound ({e})"
                );
                trial("ranks_meet_over_the_ipv6_loopback_address", ipv6).with_ignored_flag(true)
            }
        },
        trial("ranks_meet_through_a_file", file_rendezvous),
        trial(
            "a_rank_of_another_run_is_refused_and_this_run_meets",
            a_stranger,
        ),
        trial(
            "a_rank_0_that_never_comes_is_a_timeout_naming_the_address",
            no_rank_0,
        ),
        trial(
            "ranks_that_disagree_on_the_size_fail_together_naming_the_rank",
            disagreeing_ranks,
        ),
        trial(
            "a_rank_that_comes_after_a_refusal_is_told_why",
            told_after_a_refusal,
        ),
        trial(
            "a_rank_0_that_cannot_make_the_id_tells_every_rank",
            rank_0_without_an_id,
        ),
        trial(
            "a_silent_connection_does_not_keep_the_team_from_meeting",
            silent_connection,
        ),
        trial(
            "a_rank_that_left_fails_the_others_before_the_id_is_shared",
            a_rank_left,
        ),
    ];
    libtest_mimic::run(&Arguments::from_args(), trials).exit_code()
}

/// One rank: meets the others as its environment says and prints `id HEX` or `error: ...` (a
/// test that failed may have stopped reading: nothing is printed then).
fn child(ms: u64) -> ExitCode {
    let var = |name: &str| std::env::var(name).ok().filter(|v| !v.trim().is_empty());
    if var(MARK).is_some() {
        let tried = match Place::from_env() {
            Ok(Place::Tcp(address)) => match TcpStream::connect(&address) {
                Ok(_) => "connected".to_owned(),
                Err(e) => format!("failed ({e})"),
            },
            other => format!("no TCP address ({other:?})"),
        };
        // Flushed at once: the test waits for this line before it starts rank 0.
        let _ = writeln!(std::io::stdout(), "tried: {tried}");
    }
    let met = Launch::from_env().and_then(|launch| {
        let place = Place::from_env()?;
        share_id(
            &place,
            &launch,
            &run_token(var),
            Duration::from_millis(ms),
            || match var(NO_ID) {
                Some(_) => Err(ferrocuda::Error::InvalidArgument {
                    what: "no id on this test's rank 0".into(),
                }),
                None => Ok(ID),
            },
        )
    });
    match met {
        Ok(id) => {
            let _ = writeln!(std::io::stdout(), "id {}", id.to_hex());
            ExitCode::SUCCESS
        }
        Err(e) => {
            let _ = writeln!(std::io::stdout(), "error: {e}");
            ExitCode::FAILURE
        }
    }
}

/// A port nothing listens on now.
fn free_port() -> anyhow::Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port())
}

/// Starts a rank with only `vars` (and the limit) in its environment.
fn rank(vars: &[(&str, String)], limit: Duration) -> anyhow::Result<Child> {
    let mut command = Command::new(std::env::current_exe()?);
    command
        .env_clear()
        .env(CHILD, limit.as_millis().to_string())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit());
    for (k, v) in vars {
        command.env(k, v);
    }
    Ok(command.spawn()?)
}

/// The first line a rank prints, read as it comes (the rest stays for [`finish`]).
fn first_line(child: &mut Child) -> anyhow::Result<String> {
    let out = child.stdout.as_mut().context("the rank's stdout")?;
    let mut line = Vec::new();
    let mut byte = [0u8];
    while out.read(&mut byte)? == 1 && byte[0] != b'\n' {
        line.push(byte[0]);
    }
    Ok(String::from_utf8_lossy(&line).into_owned())
}

/// What a rank printed, and whether it succeeded.
fn finish(child: Child) -> anyhow::Result<(bool, String)> {
    let out = child.wait_with_output()?;
    Ok((
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).trim().to_owned(),
    ))
}

/// Every rank printed rank 0's id.
fn all_got_the_id(children: Vec<Child>) -> anyhow::Result<()> {
    let want = format!("id {}", ID.to_hex());
    for (i, child) in children.into_iter().enumerate() {
        let (ok, said) = finish(child)?;
        ensure!(ok && said == want, "rank process {i}: {said}");
    }
    Ok(())
}

/// Every rank failed, saying each of `says`, well within the 20 s limit (`took`).
fn all_failed_saying(children: Vec<Child>, says: &[&str], start: Instant) -> anyhow::Result<()> {
    for (i, child) in children.into_iter().enumerate() {
        let (ok, said) = finish(child)?;
        ensure!(!ok, "rank process {i} succeeded in a failed team: {said}");
        for s in says {
            ensure!(said.contains(s), "rank process {i} says {s:?}: {said}");
        }
    }
    let took = start.elapsed();
    ensure!(
        took < Duration::from_secs(10),
        "the limit was 20 s; the ranks were told after {took:?}"
    );
    Ok(())
}

/// The variables of torchrun's rank `r` of `size`, meeting at `127.0.0.1:port`.
fn torchrun(r: usize, size: usize, port: u16) -> Vec<(&'static str, String)> {
    vec![
        ("RANK", r.to_string()),
        ("WORLD_SIZE", size.to_string()),
        ("LOCAL_RANK", r.to_string()),
        ("MASTER_ADDR", "127.0.0.1".into()),
        ("MASTER_PORT", port.to_string()),
    ]
}

/// A connection to `127.0.0.1:port`, once rank 0 listens there (within 10 s).
fn connect_when_listening(port: u16) -> anyhow::Result<TcpStream> {
    let start = Instant::now();
    loop {
        match TcpStream::connect(("127.0.0.1", port)) {
            Ok(stream) => return Ok(stream),
            Err(e) if start.elapsed() > Duration::from_secs(10) => {
                anyhow::bail!("rank 0 never listened on port {port}: {e}")
            }
            Err(_) => std::thread::sleep(Duration::from_millis(10)),
        }
    }
}

const LIMIT: Duration = Duration::from_secs(20);

fn ranks_meet_over_tcp() -> anyhow::Result<()> {
    let port = free_port()?;
    let mut children = Vec::new();
    for r in [3, 1, 2] {
        let mut vars = torchrun(r, 4, port);
        vars.push((MARK, "1".into()));
        let mut child = rank(&vars, LIMIT)?;
        // Rank 0 starts only once every other rank found nothing listening.
        let tried = first_line(&mut child)?;
        ensure!(
            tried.starts_with("tried: failed"),
            "rank {r} tries the address before rank 0 starts: {tried}"
        );
        children.push(child);
    }
    children.push(rank(&torchrun(0, 4, port), LIMIT)?);
    all_got_the_id(children)
}

fn other_launchers() -> anyhow::Result<()> {
    for (rank_var, size_var) in [
        ("SLURM_PROCID", "SLURM_NTASKS"),
        ("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"),
    ] {
        let place = format!("tcp://127.0.0.1:{}", free_port()?);
        let children = (0..3)
            .map(|r| {
                rank(
                    &[
                        (rank_var, r.to_string()),
                        (size_var, "3".into()),
                        ("FERROCUDA_RENDEZVOUS", place.clone()),
                    ],
                    LIMIT,
                )
            })
            .collect::<anyhow::Result<Vec<_>>>()?;
        all_got_the_id(children).with_context(|| format!("{rank_var} ranks"))?;
    }
    Ok(())
}

fn ipv6() -> anyhow::Result<()> {
    let free = || std::net::TcpListener::bind("[::1]:0").and_then(|l| l.local_addr());
    for bracketed in [true, false] {
        let port = free()?.port();
        let children = (0..3)
            .map(|r| {
                let mut vars = vec![
                    ("SLURM_PROCID", r.to_string()),
                    ("SLURM_NTASKS", "3".into()),
                ];
                if bracketed {
                    vars.push(("FERROCUDA_RENDEZVOUS", format!("tcp://[::1]:{port}")));
                } else {
                    vars.push(("MASTER_ADDR", "::1".into()));
                    vars.push(("MASTER_PORT", port.to_string()));
                }
                rank(&vars, LIMIT)
            })
            .collect::<anyhow::Result<Vec<_>>>()?;
        all_got_the_id(children).with_context(|| {
            if bracketed {
                "at tcp://[::1]:port"
            } else {
                "at MASTER_ADDR=::1"
            }
        })?;
    }
    Ok(())
}

fn file_rendezvous() -> anyhow::Result<()> {
    let dir = std::env::temp_dir().join(format!("ferrocuda-rendezvous-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let path = dir.join("id").display().to_string();
    let children = (0..3)
        .rev()
        .map(|r| {
            rank(
                &[
                    ("RANK", r.to_string()),
                    ("WORLD_SIZE", "3".into()),
                    ("FERROCUDA_RENDEZVOUS", path.clone()),
                    ("FERROCUDA_RUN_ID", "file-run".into()),
                ],
                LIMIT,
            )
        })
        .collect::<anyhow::Result<Vec<_>>>()?;
    let met = all_got_the_id(children);
    std::fs::remove_dir_all(&dir)?;
    met
}

fn no_rank_0() -> anyhow::Result<()> {
    let port = free_port()?;
    let start = Instant::now();
    let child = rank(&torchrun(1, 2, port), Duration::from_millis(700))?;
    let (ok, said) = finish(child)?;
    let took = start.elapsed();
    ensure!(!ok, "rank 1 met no one, yet succeeded: {said}");
    ensure!(
        said.contains(&format!("127.0.0.1:{port}")) && said.contains("rank 0 never answered"),
        "the error names the address and the missing rank 0: {said}"
    );
    ensure!(
        took < Duration::from_secs(10),
        "the limit was 0.7 s; the rank gave up after {took:?}"
    );
    Ok(())
}

fn disagreeing_ranks() -> anyhow::Result<()> {
    let port = free_port()?;
    let start = Instant::now();
    // All at once, in any order: every rank hears of rank 2.
    let children = [(0, 3), (1, 3), (2, 4)]
        .into_iter()
        .map(|(r, size)| rank(&torchrun(r, size, port), LIMIT))
        .collect::<anyhow::Result<Vec<_>>>()?;
    all_failed_saying(children, &["rank 2", "counts 4 ranks"], start)
}

fn told_after_a_refusal() -> anyhow::Result<()> {
    let port = free_port()?;
    let zero = rank(&torchrun(0, 3, port), LIMIT)?;
    let (ok, said) = finish(rank(&torchrun(2, 4, port), LIMIT)?)?;
    ensure!(
        !ok && said.contains("counts 4 ranks"),
        "rank 2, of another size, is refused: {said}"
    );
    // Rank 1 comes once rank 2 has been refused.
    let start = Instant::now();
    let one = rank(&torchrun(1, 3, port), LIMIT)?;
    all_failed_saying(vec![one, zero], &["rank 2", "counts 4 ranks"], start)
}

fn rank_0_without_an_id() -> anyhow::Result<()> {
    let port = free_port()?;
    let start = Instant::now();
    let mut vars = torchrun(0, 3, port);
    vars.push((NO_ID, "1".into()));
    let children = vec![
        rank(&vars, LIMIT)?,
        rank(&torchrun(1, 3, port), LIMIT)?,
        rank(&torchrun(2, 3, port), LIMIT)?,
    ];
    all_failed_saying(children, &["no id on this test's rank 0"], start)
}

fn silent_connection() -> anyhow::Result<()> {
    let port = free_port()?;
    let zero = rank(&torchrun(0, 3, port), LIMIT)?;
    // Connects first and never says a word, until the team has met.
    let silent = connect_when_listening(port)?;
    let start = Instant::now();
    let others = [1, 2].map(|r| rank(&torchrun(r, 3, port), LIMIT));
    let mut children = vec![zero];
    for other in others {
        children.push(other?);
    }
    all_got_the_id(children)?;
    let took = start.elapsed();
    ensure!(
        took < Duration::from_secs(10),
        "the limit was 20 s; the team met after {took:?}"
    );
    drop(silent);
    Ok(())
}

/// A rank of another run (another job on the same port) is refused alone: this run meets.
fn a_stranger() -> anyhow::Result<()> {
    let port = free_port()?;
    let ours = |r: usize| {
        let mut vars = torchrun(r, 3, port);
        vars.push(("FERROCUDA_RUN_ID", "ours".into()));
        vars
    };
    let zero = rank(&ours(0), LIMIT)?;
    drop(connect_when_listening(port)?);
    let mut theirs = torchrun(1, 3, port);
    theirs.push(("FERROCUDA_RUN_ID", "theirs".into()));
    let (ok, said) = finish(rank(&theirs, LIMIT)?)?;
    ensure!(
        !ok && said.contains("not of `theirs`"),
        "the other run's rank: {said}"
    );
    let mut children = vec![zero];
    for r in [1, 2] {
        children.push(rank(&ours(r), LIMIT)?);
    }
    all_got_the_id(children)
}

fn a_rank_left() -> anyhow::Result<()> {
    let port = free_port()?;
    let zero = rank(&torchrun(0, 3, port), LIMIT)?;
    // Rank 1 comes once rank 0 listens, and gives up before rank 2 comes.
    let mut probe = connect_when_listening(port)?;
    writeln!(probe, "not a rank")?;
    drop(probe);
    let (ok, said) = finish(rank(&torchrun(1, 3, port), Duration::from_secs(1))?)?;
    ensure!(
        !ok && said
            .contains("sent no id within the limit, most likely still waiting for other ranks"),
        "rank 1 met rank 0 and gave up waiting: {said}"
    );
    let start = Instant::now();
    let two = rank(&torchrun(2, 3, port), LIMIT)?;
    all_failed_saying(
        vec![two, zero],
        &["rank 1 left before the id was shared"],
        start,
    )
}
