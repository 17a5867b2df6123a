//! How the ranks a launcher started find each other (集合点, rendezvous): who each one is, and
//! where rank 0 hands out NCCL's unique id.
//!
//! Who: [`Launch::from_vars`] reads the launcher's variables, the first set present of
//! - torchrun's (and any launcher that copies it): `RANK`, `WORLD_SIZE`, `LOCAL_RANK`;
//! - Slurm's (`srun`): `SLURM_PROCID`, `SLURM_NTASKS`, `SLURM_LOCALID`;
//! - Open MPI's (`mpirun`): `OMPI_COMM_WORLD_RANK`, `OMPI_COMM_WORLD_SIZE`,
//!   `OMPI_COMM_WORLD_LOCAL_RANK`.
//!
//! Where ([`Place::from_vars`]): `FERROCUDA_RENDEZVOUS` names a file every rank sees
//! (`file:///shared/run-42` or a path) or a TCP address (`tcp://host:port`); without it,
//! `MASTER_ADDR:MASTER_PORT`. Over TCP rank 0 listens on the port (every interface), each other
//! rank connects and says which rank it is, of how many, in which run; rank 0 answers every one
//! with the id once all have come, or refuses them all, naming the rank that disagrees. Every
//! wait is bounded: a rank 0 that never comes is an [`Error::Timeout`] naming the address.
//! torchrun's own store already listens on `MASTER_PORT` on the first host: under torchrun,
//! name another port (`FERROCUDA_RENDEZVOUS=tcp://$MASTER_ADDR:29600`).
use std::io::{BufRead as _, BufReader, Write as _};
use std::net::{TcpListener, TcpStream, ToSocketAddrs as _};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::runtime::error::{Error, Result};

use super::nccl::UniqueId;

fn invalid(what: String) -> Error {
    Error::InvalidArgument { what }
}

/// This process's place in the run, as its launcher said.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Launch {
    /// Its rank, below `size`.
    pub rank: usize,
    /// How many ranks the run has.
    pub size: usize,
    /// Its rank among the ranks of its host: the device it drives.
    pub local: usize,
    /// Which launcher's variables said so (`"RANK"`, `"SLURM_PROCID"`, `"OMPI_COMM_WORLD_RANK"`).
    pub source: &'static str,
}

/// The launchers' variables: rank, size and local rank, in the order they are looked for.
const LAUNCHERS: [[&str; 3]; 3] = [
    ["RANK", "WORLD_SIZE", "LOCAL_RANK"],
    ["SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID"],
    [
        "OMPI_COMM_WORLD_RANK",
        "OMPI_COMM_WORLD_SIZE",
        "OMPI_COMM_WORLD_LOCAL_RANK",
    ],
];

impl Launch {
    /// From the process's environment.
    pub fn from_env() -> Result<Self> {
        Self::from_vars(env_var)
    }

    /// From the variables `var` gives (empty counts as unset): the first launcher whose rank
    /// variable is set; the local rank defaults to the rank (one host).
    pub fn from_vars(var: impl Fn(&str) -> Option<String>) -> Result<Self> {
        let number = |name: &str| -> Result<Option<usize>> {
            var(name)
                .map(|v| {
                    v.trim()
                        .parse::<usize>()
                        .map_err(|_| invalid(format!("{name}={v:?} is not a rank number")))
                })
                .transpose()
        };
        for [rank_var, size_var, local_var] in LAUNCHERS {
            let Some(rank) = number(rank_var)? else {
                continue;
            };
            let Some(size) = number(size_var)? else {
                return Err(invalid(format!(
                    "{rank_var}={rank} is set but {size_var} is not: how many ranks?"
                )));
            };
            if rank >= size {
                return Err(invalid(format!(
                    "{rank_var}={rank} is not below {size_var}={size}"
                )));
            }
            return Ok(Self {
                rank,
                size,
                local: number(local_var)?.unwrap_or(rank),
                source: rank_var,
            });
        }
        Err(invalid(
            "a team from the environment needs a launcher's rank variables: RANK and WORLD_SIZE \
             (torchrun), SLURM_PROCID and SLURM_NTASKS (srun) or OMPI_COMM_WORLD_RANK and \
             OMPI_COMM_WORLD_SIZE (mpirun)"
                .into(),
        ))
    }
}

/// Where the ranks meet.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Place {
    /// A file every rank sees: rank 0 writes the id, the others read it.
    File(PathBuf),
    /// `host:port`: rank 0 listens on the port, the others connect to the address.
    Tcp(String),
}

impl Place {
    /// From the process's environment.
    pub fn from_env() -> Result<Self> {
        Self::from_vars(env_var)
    }

    /// `FERROCUDA_RENDEZVOUS` (`tcp://host:port`, `file://path` or a path), else
    /// `MASTER_ADDR:MASTER_PORT`.
    pub fn from_vars(var: impl Fn(&str) -> Option<String>) -> Result<Self> {
        if let Some(place) = var("FERROCUDA_RENDEZVOUS") {
            let place = place.trim();
            return match place.strip_prefix("tcp://") {
                Some(address) => Ok(Self::Tcp(checked_address(address, "FERROCUDA_RENDEZVOUS")?)),
                None => Ok(Self::File(PathBuf::from(
                    place.strip_prefix("file://").unwrap_or(place),
                ))),
            };
        }
        match (var("MASTER_ADDR"), var("MASTER_PORT")) {
            (Some(host), Some(port)) => Ok(Self::Tcp(checked_address(
                &format!("{}:{}", host.trim(), port.trim()),
                "MASTER_ADDR:MASTER_PORT",
            )?)),
            _ => Err(invalid(
                "a team from the environment needs a meeting place: MASTER_ADDR and MASTER_PORT, \
                 or FERROCUDA_RENDEZVOUS (tcp://host:port, or a file every rank sees)"
                    .into(),
            )),
        }
    }
}

/// `address` when it is `host:port` with a port number above 0.
fn checked_address(address: &str, what: &str) -> Result<String> {
    match address.rsplit_once(':') {
        Some((host, port)) if !host.is_empty() && port.parse::<u16>().is_ok_and(|p| p > 0) => {
            Ok(address.to_owned())
        }
        _ => Err(invalid(format!(
            "{what}: {address:?} is not host:port with a port from 1 to 65535"
        ))),
    }
}

/// A variable of the process's environment; empty counts as unset.
pub(crate) fn env_var(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.trim().is_empty())
}

/// What tells this run's rendezvous from a stale one or another run's: the launcher's run
/// identity (`FERROCUDA_RUN_ID`, else torchrun's run id and restart count, Slurm's job and
/// step, or the master's address and port), or `-` when the launcher gives none.
pub fn run_token(var: impl Fn(&str) -> Option<String>) -> String {
    // torchrun without `--rdzv-id` sets the run id to `none`: not an identity.
    let var = |name: &str| var(name).filter(|v| !v.trim().is_empty() && v.trim() != "none");
    let joined = |names: &[&str]| -> Option<String> {
        let parts: Option<Vec<String>> = names.iter().map(|n| var(n)).collect();
        parts.map(|p| p.join(":"))
    };
    var("FERROCUDA_RUN_ID")
        .or_else(|| joined(&["TORCHELASTIC_RUN_ID", "TORCHELASTIC_RESTART_COUNT"]))
        .or_else(|| joined(&["SLURM_JOB_ID", "SLURM_STEP_ID"]))
        .or_else(|| joined(&["MASTER_ADDR", "MASTER_PORT"]))
        .map_or_else(
            || "-".to_owned(),
            |t| t.split_whitespace().collect::<Vec<_>>().join("_"),
        )
}

/// The id every rank of `launch`'s run gets: made by rank 0 (`make`) and handed out at
/// `place`, within `timeout`. `token` is the run's identity ([`run_token`]).
pub fn share_id(
    place: &Place,
    launch: &Launch,
    token: &str,
    timeout: Duration,
    make: impl FnOnce() -> Result<UniqueId>,
) -> Result<UniqueId> {
    match place {
        Place::File(path) => {
            if launch.rank == 0 {
                let id = make()?;
                publish(path, launch.size, token, &id)?;
                Ok(id)
            } else {
                await_id(path, launch.size, token, launch.rank, timeout)
            }
        }
        Place::Tcp(address) => {
            if launch.rank == 0 {
                serve(address, launch.size, token, timeout, make)
            } else {
                ask(address, launch, token, timeout)
            }
        }
    }
}

/// The first line of a rank's hello: `ferrocuda-rendezvous SIZE TOKEN RANK`.
const HELLO: &str = "ferrocuda-rendezvous";

/// Rank 0 over TCP: listens on `address`'s port until every other rank of `size` said hello,
/// then sends each the id; a rank that disagrees (another size or run, a rank number out of
/// range or taken) fails them all, named.
fn serve(
    address: &str,
    size: usize,
    token: &str,
    timeout: Duration,
    make: impl FnOnce() -> Result<UniqueId>,
) -> Result<UniqueId> {
    let start = Instant::now();
    let port = address
        .rsplit_once(':')
        .and_then(|(_, p)| p.parse::<u16>().ok())
        .unwrap_or(0);
    let io = |what: &str, e: std::io::Error| {
        invalid(format!(
            "rendezvous: rank 0 cannot {what} port {port} ({address}): {e}"
        ))
    };
    let listener = TcpListener::bind(("0.0.0.0", port)).map_err(|e| io("listen on", e))?;
    listener.set_nonblocking(true).map_err(|e| io("poll", e))?;
    let id = make()?;
    let mut peers: Vec<Option<TcpStream>> = (0..size).map(|_| None).collect();
    let mut came = 1;
    while came < size {
        let left = timeout.saturating_sub(start.elapsed());
        if left.is_zero() {
            let missing: Vec<String> = (1..size)
                .filter(|&r| peers[r].is_none())
                .map(|r| r.to_string())
                .collect();
            refuse_all(&mut peers, "rank 0 gave up waiting for the other ranks");
            return Err(Error::Timeout {
                what: format!(
                    "the rendezvous on port {port} ({address}) of run `{token}`: rank(s) {} never \
                     came",
                    missing.join(", ")
                ),
                rank: 0,
                ranks: size,
                timeout,
            });
        }
        let (mut stream, from) = match listener.accept() {
            Ok(accepted) => accepted,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                std::thread::sleep(Duration::from_millis(5));
                continue;
            }
            Err(e) => return Err(io("accept on", e)),
        };
        // A peer that connects and says nothing must not hold rank 0 past the limit.
        let line = stream
            .set_nonblocking(false)
            .and_then(|()| stream.set_read_timeout(Some(left.max(Duration::from_millis(1)))))
            .and_then(|()| read_line(&stream));
        let hello = match line {
            Ok(line) => line,
            // Not a rank (a port scan, a rank that died): the others may still come.
            Err(_) => continue,
        };
        let words: Vec<&str> = hello.split_whitespace().collect();
        let rank = match words[..] {
            [HELLO, their_size, their_token, rank] => {
                let rank = rank.parse::<usize>().ok();
                let why = match (their_size.parse::<usize>().ok(), rank) {
                    (Some(s), _) if s != size => Some(format!(
                        "rank {} of {from} counts {s} ranks, rank 0 counts {size}",
                        rank.map_or_else(|| "?".to_owned(), |r| r.to_string())
                    )),
                    _ if their_token != token => Some(format!(
                        "a rank of another run (`{their_token}`, this is `{token}`) came from {from}"
                    )),
                    (_, Some(r)) if r == 0 || r >= size => {
                        Some(format!("a rank from {from} says it is rank {r} of {size}"))
                    }
                    (_, Some(r)) if peers[r].is_some() => Some(format!(
                        "two ranks say they are rank {r} (the second from {from})"
                    )),
                    (_, None) => Some(format!("a rank from {from} sent no rank number")),
                    (_, Some(_)) => None,
                };
                if let Some(why) = why {
                    let _ = writeln!(stream, "refused {why}");
                    refuse_all(&mut peers, &why);
                    return Err(invalid(format!("rendezvous on port {port}: {why}")));
                }
                rank.unwrap_or(0)
            }
            // Not a rank: ignored.
            _ => continue,
        };
        peers[rank] = Some(stream);
        came += 1;
    }
    let line = format!("id {}\n", id.to_hex());
    for (rank, peer) in peers.iter_mut().enumerate() {
        if let Some(peer) = peer
            && let Err(e) = peer.write_all(line.as_bytes())
        {
            return Err(invalid(format!(
                "rendezvous on port {port}: rank {rank} left before it got the id: {e}"
            )));
        }
    }
    Ok(id)
}

/// Tells every rank that came why the rendezvous failed, and lets it go.
fn refuse_all(peers: &mut [Option<TcpStream>], why: &str) {
    for peer in peers.iter_mut().filter_map(Option::take) {
        let mut peer = peer;
        let _ = writeln!(peer, "refused {why}");
    }
}

/// One line, without its end, from `stream` (its read timeout applies): each side sends one
/// line and then waits, so nothing after it is lost.
fn read_line(stream: &TcpStream) -> std::io::Result<String> {
    let mut line = String::new();
    let n = BufReader::new(std::io::Read::take(stream, 4096)).read_line(&mut line)?;
    if n == 0 {
        return Err(std::io::ErrorKind::UnexpectedEof.into());
    }
    Ok(line.trim_end().to_owned())
}

/// Any other rank over TCP: connects to rank 0 (again and again while nothing listens there
/// yet), says who it is, and waits for the id, all within `timeout`.
fn ask(address: &str, launch: &Launch, token: &str, timeout: Duration) -> Result<UniqueId> {
    let start = Instant::now();
    let (rank, size) = (launch.rank, launch.size);
    let timed_out = |what: String| Error::Timeout {
        what,
        rank,
        ranks: size,
        timeout,
    };
    let no_rank_0 = |last: &str| {
        timed_out(format!(
            "the rendezvous at {address} of run `{token}`: rank 0 never answered there ({last})"
        ))
    };
    let mut last = String::from("nothing tried");
    let stream = loop {
        let left = timeout.saturating_sub(start.elapsed());
        if left.is_zero() {
            return Err(no_rank_0(&last));
        }
        let targets = match address.to_socket_addrs() {
            Ok(targets) => targets.collect::<Vec<_>>(),
            Err(e) => {
                last = format!("cannot resolve it: {e}");
                Vec::new()
            }
        };
        let connected = targets.iter().find_map(|target| {
            match TcpStream::connect_timeout(target, left.min(Duration::from_secs(1))) {
                Ok(stream) => Some(stream),
                Err(e) => {
                    last = e.to_string();
                    None
                }
            }
        });
        match connected {
            Some(stream) => break stream,
            None => std::thread::sleep(Duration::from_millis(20)),
        }
    };
    let io = |e: std::io::Error| {
        if matches!(
            e.kind(),
            std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
        ) {
            no_rank_0("it accepted the connection and sent nothing")
        } else {
            invalid(format!(
                "rendezvous at {address}: rank {rank} lost rank 0: {e}"
            ))
        }
    };
    let mut writer = &stream;
    writeln!(writer, "{HELLO} {size} {token} {rank}").map_err(io)?;
    let left = timeout.saturating_sub(start.elapsed());
    stream
        .set_read_timeout(Some(left.max(Duration::from_millis(1))))
        .map_err(io)?;
    let answer = read_line(&stream).map_err(io)?;
    if let Some(hex) = answer.strip_prefix("id ")
        && let Some(id) = UniqueId::from_hex(hex.trim())
    {
        return Ok(id);
    }
    if let Some(why) = answer.strip_prefix("refused ") {
        return Err(invalid(format!(
            "rendezvous at {address}: rank 0 refused the team: {why}"
        )));
    }
    Err(invalid(format!(
        "rendezvous at {address}: rank 0 answered {answer:?}"
    )))
}

/// Rank 0's side of the file rendezvous: the id written whole (a temporary file, readable by
/// its owner only, renamed over the path), with the world size and the run's token, so that a
/// reader never sees half of it nor takes a stale one.
fn publish(path: &Path, size: usize, token: &str, id: &UniqueId) -> Result<()> {
    use std::os::unix::fs::OpenOptionsExt as _;
    let io =
        |e: std::io::Error| invalid(format!("rendezvous: cannot write {}: {e}", path.display()));
    let tmp = path.with_extension(format!("tmp-{}", std::process::id()));
    // A new file (never one already there, nor where a link points), owner-only from birth.
    let _ = std::fs::remove_file(&tmp);
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&tmp)
        .map_err(io)?;
    file.write_all(format!("ferrocuda-nccl {size} {token} {}\n", id.to_hex()).as_bytes())
        .map_err(io)?;
    drop(file);
    std::fs::rename(&tmp, path).map_err(io)
}

/// The other ranks' side of the file rendezvous: the id of a world of `size`, read once rank 0
/// has written it, within `timeout`.
fn await_id(
    path: &Path,
    size: usize,
    token: &str,
    rank: usize,
    timeout: Duration,
) -> Result<UniqueId> {
    let start = Instant::now();
    loop {
        if let Ok(text) = std::fs::read_to_string(path) {
            let mut words = text.split_whitespace();
            if words.next() == Some("ferrocuda-nccl")
                && words.next().and_then(|w| w.parse::<usize>().ok()) == Some(size)
                && words.next() == Some(token)
                && let Some(id) = words.next().and_then(UniqueId::from_hex)
            {
                return Ok(id);
            }
        }
        if start.elapsed() > timeout {
            return Err(Error::Timeout {
                what: format!(
                    "the rendezvous (rank 0 writing NCCL's id for {size} ranks of run `{token}` \
                     to {})",
                    path.display()
                ),
                rank,
                ranks: size,
                timeout,
            });
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_rendezvous_file_carries_the_id_and_refuses_another_world_size() {
        let dir = std::env::temp_dir().join(format!("ferrocuda-rdv-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("id");
        let id = UniqueId([7; 128]);
        publish(&path, 4, "job-7", &id).unwrap();
        assert_eq!(
            await_id(&path, 4, "job-7", 1, Duration::from_secs(1)).unwrap(),
            id
        );
        // A stale file: another run's token is not taken.
        let stale = await_id(&path, 4, "job-8", 1, Duration::from_millis(100)).unwrap_err();
        assert!(stale.to_string().contains("run `job-8`"), "{stale}");
        let wrong = await_id(&path, 8, "job-7", 3, Duration::from_millis(100)).unwrap_err();
        let text = wrong.to_string();
        assert!(
            text.contains("rendezvous") && text.contains("rank 3 of 8") && text.contains("0.1 s"),
            "{text}"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    fn vars<'a>(set: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
        move |name| {
            set.iter()
                .find(|(k, _)| *k == name)
                .map(|(_, v)| (*v).to_owned())
        }
    }

    #[test]
    fn each_launchers_rank_variables_are_read_and_torchruns_come_first() {
        let torch = [("RANK", "3"), ("WORLD_SIZE", "8"), ("LOCAL_RANK", "1")];
        let slurm = [
            ("SLURM_PROCID", "5"),
            ("SLURM_NTASKS", "16"),
            ("SLURM_LOCALID", "2"),
        ];
        let mpi = [
            ("OMPI_COMM_WORLD_RANK", "6"),
            ("OMPI_COMM_WORLD_SIZE", "7"),
            ("OMPI_COMM_WORLD_LOCAL_RANK", "0"),
        ];
        let got = |set: &[(&str, &str)]| {
            Launch::from_vars(vars(set)).map(|l| (l.rank, l.size, l.local, l.source))
        };
        assert_eq!(got(&torch).unwrap(), (3, 8, 1, "RANK"));
        assert_eq!(got(&slurm).unwrap(), (5, 16, 2, "SLURM_PROCID"));
        assert_eq!(got(&mpi).unwrap(), (6, 7, 0, "OMPI_COMM_WORLD_RANK"));
        // torchrun inside a Slurm allocation: torchrun's numbering is the team's.
        let both: Vec<_> = torch.iter().chain(&slurm).copied().collect();
        assert_eq!(got(&both).unwrap().3, "RANK");
        // No local rank: one host.
        assert_eq!(got(&[("RANK", "2"), ("WORLD_SIZE", "4")]).unwrap().2, 2);
        for (set, says) in [
            (
                &[("RANK", "4"), ("WORLD_SIZE", "4")][..],
                "not below WORLD_SIZE=4",
            ),
            (&[("SLURM_PROCID", "1")][..], "SLURM_NTASKS is not"),
            (
                &[("OMPI_COMM_WORLD_RANK", "x"), ("OMPI_COMM_WORLD_SIZE", "2")][..],
                "not a rank number",
            ),
            (&[][..], "SLURM_PROCID and SLURM_NTASKS"),
        ] {
            let err = got(set).unwrap_err().to_string();
            assert!(err.contains(says), "{err}");
        }
    }

    #[test]
    fn the_meeting_place_is_the_named_one_else_the_masters_address() {
        let place = |set: &[(&str, &str)]| Place::from_vars(vars(set));
        assert_eq!(
            place(&[
                ("FERROCUDA_RENDEZVOUS", "tcp://node7:29600"),
                ("MASTER_PORT", "1")
            ])
            .unwrap(),
            Place::Tcp("node7:29600".into())
        );
        assert_eq!(
            place(&[("FERROCUDA_RENDEZVOUS", "file:///shared/run-1")]).unwrap(),
            Place::File("/shared/run-1".into())
        );
        assert_eq!(
            place(&[("MASTER_ADDR", "10.0.0.1"), ("MASTER_PORT", "29500")]).unwrap(),
            Place::Tcp("10.0.0.1:29500".into())
        );
        for set in [
            &[("MASTER_ADDR", "10.0.0.1"), ("MASTER_PORT", "0")][..],
            &[("FERROCUDA_RENDEZVOUS", "tcp://node7")][..],
            &[("MASTER_ADDR", "10.0.0.1")][..],
        ] {
            assert!(place(set).is_err(), "{set:?}");
        }
    }
}
