//! The rendezvous of ranks a launcher started, across processes on the loopback address: each
//! child process is one rank, as torchrun, srun or mpirun would start it, and gets NCCL's id
//! (a made-up one: no GPU is needed to meet) from rank 0, over TCP or through a file.
use std::process::{Child, Command, ExitCode, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context as _, ensure};
use ferrocuda::multi::nccl::UniqueId;
use ferrocuda::multi::rendezvous::{Launch, Place, run_token, share_id};
use libtest_mimic::{Arguments, Trial};

/// Set in a child's environment: it is a rank, with this limit in milliseconds.
const CHILD: &str = "FERROCUDA_TEST_RENDEZVOUS_MS";

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
        trial("ranks_meet_through_a_file", file_rendezvous),
        trial(
            "a_rank_0_that_never_comes_is_a_timeout_naming_the_address",
            no_rank_0,
        ),
        trial(
            "ranks_that_disagree_on_the_size_fail_together_naming_the_rank",
            disagreeing_ranks,
        ),
    ];
    libtest_mimic::run(&Arguments::from_args(), trials).exit_code()
}

/// One rank: meets the others as its environment says and prints `id HEX` or `error: ...`.
fn child(ms: u64) -> ExitCode {
    let var = |name: &str| std::env::var(name).ok().filter(|v| !v.trim().is_empty());
    let met = Launch::from_env().and_then(|launch| {
        let place = Place::from_env()?;
        share_id(
            &place,
            &launch,
            &run_token(var),
            Duration::from_millis(ms),
            || Ok(ID),
        )
    });
    match met {
        Ok(id) => {
            println!("id {}", id.to_hex());
            ExitCode::SUCCESS
        }
        Err(e) => {
            println!("error: {e}");
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

fn ranks_meet_over_tcp() -> anyhow::Result<()> {
    let port = free_port()?.to_string();
    let vars = |r: usize| {
        vec![
            ("RANK", r.to_string()),
            ("WORLD_SIZE", "4".into()),
            ("LOCAL_RANK", r.to_string()),
            ("MASTER_ADDR", "127.0.0.1".into()),
            ("MASTER_PORT", port.clone()),
        ]
    };
    let limit = Duration::from_secs(20);
    let mut children = Vec::new();
    for r in [3, 1, 2] {
        children.push(rank(&vars(r), limit)?);
    }
    // The others try to connect before anything listens.
    std::thread::sleep(Duration::from_millis(300));
    children.push(rank(&vars(0), limit)?);
    all_got_the_id(children)
}

fn other_launchers() -> anyhow::Result<()> {
    let limit = Duration::from_secs(20);
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
                    limit,
                )
            })
            .collect::<anyhow::Result<Vec<_>>>()?;
        all_got_the_id(children).with_context(|| format!("{rank_var} ranks"))?;
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
                Duration::from_secs(20),
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
    let child = rank(
        &[
            ("RANK", "1".into()),
            ("WORLD_SIZE", "2".into()),
            ("MASTER_ADDR", "127.0.0.1".into()),
            ("MASTER_PORT", port.to_string()),
        ],
        Duration::from_millis(700),
    )?;
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
    let port = free_port()?.to_string();
    let vars = |r: usize, size: usize| {
        vec![
            ("RANK", r.to_string()),
            ("WORLD_SIZE", size.to_string()),
            ("MASTER_ADDR", "127.0.0.1".into()),
            ("MASTER_PORT", port.clone()),
        ]
    };
    let limit = Duration::from_secs(6);
    let zero = rank(&vars(0, 3), limit)?;
    let one = rank(&vars(1, 3), limit)?;
    // Rank 1 has come when rank 2, which counts another size, does.
    std::thread::sleep(Duration::from_millis(1500));
    let two = rank(&vars(2, 4), limit)?;
    let said: Vec<(bool, String)> = [zero, one, two]
        .into_iter()
        .map(finish)
        .collect::<anyhow::Result<_>>()?;
    for (r, (ok, text)) in said.iter().enumerate() {
        ensure!(!ok, "rank {r} succeeded in a team that disagrees: {text}");
    }
    for r in [0, 1, 2] {
        ensure!(
            said[r].1.contains("rank 2") && said[r].1.contains("counts 4 ranks"),
            "rank {r} names rank 2 and its size: {}",
            said[r].1
        );
    }
    Ok(())
}
