//! How the ranks a launcher started find each other (集合点, rendezvous): who each one is, and
//! where rank 0 hands out NCCL's unique id.
//!
//! Who: [`Launch::from_vars`] reads the launcher's variables, the first set present of
//! - torchrun's (and any launcher that copies it): `RANK`, `WORLD_SIZE`, `LOCAL_RANK`;
//! - Open MPI's (`mpirun`): `OMPI_COMM_WORLD_RANK`, `OMPI_COMM_WORLD_SIZE`,
//!   `OMPI_COMM_WORLD_LOCAL_RANK`;
//! - Slurm's (`srun`): `SLURM_PROCID`, `SLURM_NTASKS`, `SLURM_LOCALID`.
//!
//! (`mpirun` inside a Slurm allocation leaves the allocation's `SLURM_*` set: its own variables
//! describe the launch, so they come first.)
//!
//! Where ([`Place::from_vars`]): `FERROCUDA_RENDEZVOUS` names a file every rank sees
//! (`file:///shared/run-42` or a path) or a TCP address (`tcp://host:port`, `tcp://[::1]:port`);
//! without it, `MASTER_ADDR:MASTER_PORT`. Over TCP rank 0 listens on the port (every interface
//! of the address family the host resolves to), each other rank connects and says which rank it
//! is, of how many, in which run; rank 0 answers every one with the id once all have come and
//! are still there, or refuses every rank that came or comes, naming the rank that disagrees or
//! left, or why rank 0 failed. Every wait is bounded: a rank 0 that never comes is an
//! [`Error::Timeout`] naming the address. torchrun's own store already listens on
//! `MASTER_PORT` on the first host: under torchrun `FERROCUDA_RENDEZVOUS` must name another
//! place (`FERROCUDA_RENDEZVOUS=tcp://$MASTER_ADDR:29600`).
use std::io::{BufRead as _, BufReader, ErrorKind, Write as _};
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, TcpListener, TcpStream, ToSocketAddrs as _};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime};

use crate::runtime::error::{Error, Result};

use super::nccl::UniqueId;

fn invalid(what: String) -> Error {
    Error::InvalidArgument { what }
}

/// The most ranks a run may have: a larger size is a launcher's mistake, not a run.
pub const MAX_RANKS: usize = 65_536;

/// How long rank 0 waits for a connection's hello before it drops it and accepts the next
/// (a rank sends its hello as soon as it connects).
const HELLO_WAIT: Duration = Duration::from_secs(2);

/// How much older than a rank's start a rendezvous file without a run identity may be and still
/// be this run's: the ranks' start times and clocks differ by this much at most.
const FILE_SLACK: Duration = Duration::from_secs(10);

/// The token of a run without an identity ([`run_token`]).
const NO_RUN: &str = "-";

/// This process's place in the run, as its launcher said.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Launch {
    /// Its rank, below `size`.
    pub rank: usize,
    /// How many ranks the run has, at most [`MAX_RANKS`].
    pub size: usize,
    /// Its rank among the ranks of its host: the device it drives.
    pub local: usize,
    /// Which launcher's variables said so (`"RANK"`, `"OMPI_COMM_WORLD_RANK"`, `"SLURM_PROCID"`).
    pub source: &'static str,
}

/// The launchers' variables: rank, size and local rank, in the order they are looked for.
const LAUNCHERS: [[&str; 3]; 3] = [
    ["RANK", "WORLD_SIZE", "LOCAL_RANK"],
    [
        "OMPI_COMM_WORLD_RANK",
        "OMPI_COMM_WORLD_SIZE",
        "OMPI_COMM_WORLD_LOCAL_RANK",
    ],
    ["SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID"],
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
            if size > MAX_RANKS {
                return Err(invalid(format!(
                    "{size_var}={size} is more ranks than a run may have ({MAX_RANKS})"
                )));
            }
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
             (torchrun), OMPI_COMM_WORLD_RANK and OMPI_COMM_WORLD_SIZE (mpirun) or SLURM_PROCID \
             and SLURM_NTASKS (srun)"
                .into(),
        ))
    }
}

/// Where the ranks meet.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Place {
    /// A file every rank sees: rank 0 writes the id, the others read it.
    File(PathBuf),
    /// `host:port` (an IPv6 host in brackets): rank 0 listens on the port, the others connect
    /// to the address.
    Tcp(String),
}

impl Place {
    /// From the process's environment.
    pub fn from_env() -> Result<Self> {
        Self::from_vars(env_var)
    }

    /// `FERROCUDA_RENDEZVOUS` (`tcp://host:port`, `file://path` or a path), else
    /// `MASTER_ADDR:MASTER_PORT`, which under torchrun is torchrun's own store: there
    /// `FERROCUDA_RENDEZVOUS` is required.
    pub fn from_vars(var: impl Fn(&str) -> Option<String>) -> Result<Self> {
        if let Some(place) = var("FERROCUDA_RENDEZVOUS") {
            let place = place.trim();
            if let Some(address) = place.strip_prefix("tcp://") {
                return Ok(Self::Tcp(checked_address(address, "FERROCUDA_RENDEZVOUS")?));
            }
            if let Some(path) = place.strip_prefix("file://") {
                return Ok(Self::File(PathBuf::from(path)));
            }
            // A bare `host:port` reads as a file name; the ranks would wait on a file nobody
            // else opens. Refused, with both spellings.
            let looks_tcp = !place.contains('/')
                && place
                    .rsplit_once(':')
                    .is_some_and(|(host, port)| !host.is_empty() && port.parse::<u16>().is_ok());
            if place.is_empty() || looks_tcp {
                return Err(invalid(format!(
                    "FERROCUDA_RENDEZVOUS=`{place}`: write tcp://{place} for a TCP address, or \
                     file://{} for a file every rank sees",
                    if place.is_empty() {
                        "/shared/run-1"
                    } else {
                        place
                    }
                )));
            }
            return Ok(Self::File(PathBuf::from(place)));
        }
        if let Some(torchrun) = ["TORCHELASTIC_RUN_ID", "TORCHELASTIC_RESTART_COUNT"]
            .into_iter()
            .find(|name| var(name).is_some())
        {
            return Err(invalid(format!(
                "under torchrun ({torchrun} is set) MASTER_ADDR:MASTER_PORT is torchrun's own \
                 store, where the rendezvous cannot listen: set \
                 FERROCUDA_RENDEZVOUS=tcp://host:port with another port \
                 (tcp://$MASTER_ADDR:29600, say), or to a file every rank sees"
            )));
        }
        match (var("MASTER_ADDR"), var("MASTER_PORT")) {
            (Some(host), Some(port)) => {
                let host = host.trim();
                // torchrun and others give an IPv6 address bare.
                let host = if host.contains(':') && !host.starts_with('[') {
                    format!("[{host}]")
                } else {
                    host.to_owned()
                };
                Ok(Self::Tcp(checked_address(
                    &format!("{host}:{}", port.trim()),
                    "MASTER_ADDR:MASTER_PORT",
                )?))
            }
            _ => Err(invalid(
                "a team from the environment needs a meeting place: MASTER_ADDR and MASTER_PORT, \
                 or FERROCUDA_RENDEZVOUS (tcp://host:port, or a file every rank sees)"
                    .into(),
            )),
        }
    }
}

/// `address` when it is `host:port` with a port number above 0, an IPv6 host in brackets.
fn checked_address(address: &str, what: &str) -> Result<String> {
    let bad = |why: &str| {
        invalid(format!(
            "{what}: {address:?} is not host:port ({why}; an IPv6 host goes in brackets: \
             [::1]:29600)"
        ))
    };
    let (host, port) = address.rsplit_once(':').ok_or_else(|| bad("no port"))?;
    if !port.parse::<u16>().is_ok_and(|p| p > 0) {
        return Err(bad("the port is not from 1 to 65535"));
    }
    let bare = host
        .strip_prefix('[')
        .map(|h| h.strip_suffix(']').and_then(|h| h.parse::<Ipv6Addr>().ok()));
    match bare {
        None if host.is_empty() => Err(bad("no host")),
        None if host.contains(':') => Err(bad("a host with a colon")),
        Some(None) => Err(bad("not an IPv6 address in the brackets")),
        _ => Ok(address.to_owned()),
    }
}

/// A variable of the process's environment; empty counts as unset.
pub(crate) fn env_var(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.trim().is_empty())
}

/// What tells this run's rendezvous from a stale one or another run's: the launch's identity,
/// which every rank of one launch shares and an earlier launch does not (`FERROCUDA_RUN_ID`,
/// else torchrun's run id (not its restart count, which each node's agent keeps for itself),
/// Open MPI's PMIx namespace, Slurm's job and step,
/// in the launchers' order), or `-` when the launcher gives none.
pub fn run_token(var: impl Fn(&str) -> Option<String>) -> String {
    // torchrun without `--rdzv-id` sets the run id to `none`: not an identity.
    let var = |name: &str| var(name).filter(|v| !v.trim().is_empty() && v.trim() != "none");
    let joined = |names: &[&str]| -> Option<String> {
        let parts: Option<Vec<String>> = names.iter().map(|n| var(n)).collect();
        parts.map(|p| p.join(":"))
    };
    var("FERROCUDA_RUN_ID")
        .or_else(|| var("TORCHELASTIC_RUN_ID"))
        .or_else(|| var("PMIX_NAMESPACE"))
        .or_else(|| joined(&["SLURM_JOB_ID", "SLURM_STEP_ID"]))
        .map_or_else(
            || NO_RUN.to_owned(),
            |t| t.split_whitespace().collect::<Vec<_>>().join("_"),
        )
}

/// The id every rank of `launch`'s run gets: made by rank 0 (`make`) and handed out at
/// `place`, within `timeout`. `token` is the run's identity ([`run_token`]).
///
/// A file holds the size, the token and the id. Rank 0 removes any file already there before
/// it makes the id, and writes the new one whole (a temporary file renamed over it). A reader
/// takes a file with its own size and token; when the token is `-` (no identity: an earlier
/// run's file looks the same), only one written at most 10 s (`FILE_SLACK`) before the
/// reader's process started, so that an earlier run's file, left by a rank 0 that failed, is
/// not taken for this run's before this run's rank 0 removes it.
pub fn share_id(
    place: &Place,
    launch: &Launch,
    token: &str,
    timeout: Duration,
    make: impl FnOnce() -> Result<UniqueId>,
) -> Result<UniqueId> {
    let (rank, size) = (launch.rank, launch.size);
    if size > MAX_RANKS || rank >= size {
        return Err(invalid(format!(
            "rendezvous: rank {rank} of {size} ranks (at most {MAX_RANKS})"
        )));
    }
    match place {
        Place::File(path) => {
            if rank == 0 {
                match std::fs::remove_file(path) {
                    Err(e) if e.kind() != ErrorKind::NotFound => {
                        return Err(invalid(format!(
                            "rendezvous: cannot remove an earlier run's {}: {e}",
                            path.display()
                        )));
                    }
                    _ => {}
                }
                let id = make()?;
                publish(path, size, token, &id)?;
                Ok(id)
            } else {
                let since = (token == NO_RUN).then(|| {
                    let start = process_start();
                    start.checked_sub(FILE_SLACK).unwrap_or(start)
                });
                await_id(path, size, token, rank, since, timeout)
            }
        }
        Place::Tcp(address) => {
            if rank == 0 {
                serve(address, size, token, timeout, make)
            } else {
                ask(address, launch, token, timeout)
            }
        }
    }
}

/// When this process started, by the system clock, else (no Linux `/proc`) now.
fn process_start() -> SystemTime {
    let now = SystemTime::now();
    started().filter(|&s| s <= now).unwrap_or(now)
}

/// When this process started, from Linux's `/proc`: the boot time and the ticks after it.
fn started() -> Option<SystemTime> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // The 22nd field, counted after the command's name (which may hold spaces) ends.
    let ticks: u64 = stat
        .rsplit_once(')')?
        .1
        .split_whitespace()
        .nth(19)?
        .parse()
        .ok()?;
    let boot: u64 = std::fs::read_to_string("/proc/stat")
        .ok()?
        .lines()
        .find_map(|l| l.strip_prefix("btime "))?
        .trim()
        .parse()
        .ok()?;
    // SAFETY: sysconf only reads a setting.
    let hz = u64::try_from(unsafe { libc::sysconf(libc::_SC_CLK_TCK) }).ok()?;
    let after_boot = Duration::from_secs(ticks.checked_div(hz)?)
        + Duration::from_secs(ticks % hz) / u32::try_from(hz).ok()?;
    SystemTime::UNIX_EPOCH.checked_add(Duration::from_secs(boot) + after_boot)
}

/// The first line of a rank's hello: `ferrocuda-rendezvous SIZE TOKEN RANK`.
const HELLO: &str = "ferrocuda-rendezvous";

/// Rank 0 over TCP: listens on `address`'s port until every other rank of `size` said hello,
/// then sends each the id, once sure that none has left. When the team cannot form (a rank
/// disagrees: another size or run, a rank number out of range or taken; a rank left; rank 0
/// cannot make the id or accept), every rank that came is refused with the reason, and rank 0
/// goes on refusing those that come until each of the others has been told, or the limit.
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
    let listener = listen(address, port)?;
    let on_port = |why: &str| invalid(format!("rendezvous on port {port} ({address}): {why}"));
    let mut peers: Vec<Option<TcpStream>> = (0..size).map(|_| None).collect();
    // The ranks refused (or gone): once the team cannot form, rank 0 is done when all are.
    let mut told = vec![false; size];
    told[0] = true;
    let made = make();
    // The last rank of another run that came (named if this run's ranks never come).
    let mut stranger: Option<String> = None;
    // Why the team cannot form, once it cannot.
    let mut failed = made
        .as_ref()
        .err()
        .map(|e| format!("rank 0 could not make the id: {e}"));
    loop {
        if let Some(why) = &failed {
            refuse_all(&mut peers, &mut told, why);
            if told.iter().all(|&t| t) || start.elapsed() >= timeout {
                return Err(made.err().unwrap_or_else(|| on_port(why)));
            }
        } else if let Ok(id) = &made
            && peers[1..].iter().all(Option::is_some)
        {
            if let Some(gone) = (1..size).find(|&r| peers[r].as_ref().is_some_and(hung_up)) {
                peers[gone] = None;
                told[gone] = true;
                failed = Some(format!("rank {gone} left before the id was shared"));
                continue;
            }
            // Once one rank has the id, the team is formed: a rank lost while it is handed out
            // fails NCCL's initialisation, within its timeout, on every rank alike (a refusal
            // now would leave the ranks already told waiting in it alone).
            let line = format!("id {}\n", id.to_hex());
            for peer in peers.iter_mut() {
                if let Some(mut peer) = peer.take() {
                    let _ = peer.write_all(line.as_bytes());
                }
            }
            return Ok(*id);
        }
        let left = timeout.saturating_sub(start.elapsed());
        if left.is_zero() {
            let missing: Vec<String> = (1..size)
                .filter(|&r| peers[r].is_none())
                .map(|r| r.to_string())
                .collect();
            let missing = missing.join(", ");
            let why = format!("rank 0 gave up waiting for rank(s) {missing}");
            refuse_all(&mut peers, &mut told, &why);
            return Err(Error::Timeout {
                what: format!(
                    "the rendezvous on port {port} ({address}) of run `{token}`: rank(s) \
                     {missing} never came{}",
                    stranger.map_or_else(String::new, |s| format!(" ({s})"))
                ),
                rank: 0,
                ranks: size,
                timeout,
            });
        }
        let (mut stream, from) = match listener.accept() {
            Ok(accepted) => accepted,
            Err(e) if transient(&e) => {
                std::thread::sleep(Duration::from_millis(5));
                continue;
            }
            Err(e) => {
                let why = format!("rank 0 cannot accept connections: {e}");
                refuse_all(&mut peers, &mut told, &why);
                return Err(made.err().unwrap_or_else(|| on_port(&why)));
            }
        };
        // A connection that says nothing holds rank 0 this long at most.
        let line = stream
            .set_nonblocking(false)
            .and_then(|()| stream.set_read_timeout(Some(left.min(HELLO_WAIT))))
            .and_then(|()| read_line(&stream));
        // Not a rank (a port scan, a rank that died): the others may still come.
        let Ok(hello) = line else { continue };
        let words: Vec<&str> = hello.split_whitespace().collect();
        let [HELLO, their_size, their_token, rank] = words[..] else {
            continue;
        };
        let rank = rank.parse::<usize>().ok();
        // A rank of another run (another job on this port): refused, and this run goes on.
        if their_token != token {
            let why = format!("this is the rendezvous of run `{token}`, not of `{their_token}`");
            let _ = writeln!(stream, "refused {why}");
            stranger = Some(format!(
                "a rank of run `{their_token}` from {from} was refused"
            ));
            continue;
        }
        // A rank of this run: one to tell if the team fails.
        let ours = rank.filter(|&r| r > 0 && r < size && their_token == token);
        if failed.is_none() {
            failed = match (their_size.parse::<usize>().ok(), rank) {
                (Some(s), _) if s != size => Some(format!(
                    "rank {} of {from} counts {s} ranks, rank 0 counts {size}",
                    rank.map_or_else(|| "?".to_owned(), |r| r.to_string())
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
        }
        match (&failed, ours) {
            (Some(why), _) => {
                let _ = writeln!(stream, "refused {why}");
                if let Some(r) = ours {
                    told[r] = true;
                }
            }
            (None, Some(r)) => peers[r] = Some(stream),
            (None, None) => {}
        }
    }
}

/// Rank 0's listener on `port`, on every interface of the family `address`'s host resolves to
/// (not the resolved address itself: a host may resolve its own name to a loopback address
/// that the other hosts cannot reach), polled.
fn listen(address: &str, port: u16) -> Result<TcpListener> {
    let io = |what: &str, e: std::io::Error| {
        invalid(format!(
            "rendezvous: rank 0 cannot {what} port {port} ({address}): {e}"
        ))
    };
    let resolved = address
        .to_socket_addrs()
        .map_err(|e| io("resolve the host of", e))?;
    let any = match resolved.into_iter().next() {
        Some(SocketAddr::V6(_)) => SocketAddr::from((Ipv6Addr::UNSPECIFIED, port)),
        Some(SocketAddr::V4(_)) => SocketAddr::from((Ipv4Addr::UNSPECIFIED, port)),
        None => {
            return Err(io(
                "listen on",
                std::io::Error::new(ErrorKind::NotFound, "the host resolves to no address"),
            ));
        }
    };
    let listener = TcpListener::bind(any).map_err(|e| io("listen on", e))?;
    listener.set_nonblocking(true).map_err(|e| io("poll", e))?;
    Ok(listener)
}

/// Whether an error of `accept` passes: nothing came yet, a connection that came and went, an
/// interrupted call, or a lack of descriptors, buffers or memory that may end.
fn transient(e: &std::io::Error) -> bool {
    use libc::{ECONNABORTED, EINTR, EMFILE, ENFILE, ENOBUFS, ENOMEM, EPROTO, EWOULDBLOCK};
    e.kind() == ErrorKind::WouldBlock
        || matches!(
            e.raw_os_error(),
            Some(ECONNABORTED | EINTR | EMFILE | ENFILE | ENOBUFS | ENOMEM | EPROTO | EWOULDBLOCK)
        )
}

/// Whether the rank at the other end of `peer` has gone: its end closed (or failed), seen
/// without waiting and without taking what it sent.
fn hung_up(peer: &TcpStream) -> bool {
    let mut byte = [0u8];
    let looked = peer
        .set_nonblocking(true)
        .and_then(|()| peer.peek(&mut byte));
    let _ = peer.set_nonblocking(false);
    match looked {
        Ok(n) => n == 0,
        Err(e) => e.kind() != ErrorKind::WouldBlock,
    }
}

/// Tells every rank that came why the rendezvous failed, notes it as told, and lets it go.
fn refuse_all(peers: &mut [Option<TcpStream>], told: &mut [bool], why: &str) {
    for (rank, peer) in peers.iter_mut().enumerate() {
        if let Some(mut peer) = peer.take() {
            let _ = writeln!(peer, "refused {why}");
            told[rank] = true;
        }
    }
}

/// One line, without its end, from `stream` (its read timeout applies): each side sends one
/// line and then waits, so nothing after it is lost.
fn read_line(stream: &TcpStream) -> std::io::Result<String> {
    let mut line = String::new();
    let n = BufReader::new(std::io::Read::take(stream, 4096)).read_line(&mut line)?;
    if n == 0 {
        return Err(ErrorKind::UnexpectedEof.into());
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
            timed_out(format!(
                "the rendezvous at {address} of run `{token}`: rank 0 took rank {rank}'s hello \
                 and sent no id within the limit, most likely still waiting for other ranks \
                 (rank 0's own error names them)"
            ))
        } else {
            invalid(format!(
                "rendezvous at {address}: rank {rank} lost its connection to rank 0 ({e}); \
                 rank 0 drops a connection that sends no hello within {} s",
                HELLO_WAIT.as_secs()
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

/// The other ranks' side of the file rendezvous: the id of a world of `size` and run `token`,
/// read once rank 0 has written it, within `timeout`; with `since`, only from a file written
/// then or later.
fn await_id(
    path: &Path,
    size: usize,
    token: &str,
    rank: usize,
    since: Option<SystemTime>,
    timeout: Duration,
) -> Result<UniqueId> {
    let start = Instant::now();
    let fresh = |file: &std::fs::File| {
        since.is_none_or(|since| {
            file.metadata()
                .and_then(|m| m.modified())
                .is_ok_and(|written| written >= since)
        })
    };
    loop {
        if let Ok(file) = std::fs::File::open(path)
            && fresh(&file)
            && let Ok(text) = std::io::read_to_string(&file)
        {
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
            let stale = if since.is_some() {
                "; without a run id (FERROCUDA_RUN_ID) a file written before this rank started is \
                 an earlier run's, and is not taken"
            } else {
                ""
            };
            return Err(Error::Timeout {
                what: format!(
                    "the rendezvous (rank 0 writing NCCL's id for {size} ranks of run `{token}` \
                     to {}{stale})",
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
        let wait = |size, token, rank, since, ms| {
            await_id(&path, size, token, rank, since, Duration::from_millis(ms))
        };
        assert_eq!(wait(4, "job-7", 1, None, 1000).unwrap(), id);
        // A stale file: another run's token is not taken.
        let stale = wait(4, "job-8", 1, None, 100).unwrap_err();
        assert!(stale.to_string().contains("run `job-8`"), "{stale}");
        let wrong = wait(8, "job-7", 3, None, 100).unwrap_err();
        let text = wrong.to_string();
        assert!(
            text.contains("rendezvous") && text.contains("rank 3 of 8") && text.contains("0.1 s"),
            "{text}"
        );
        // Without a run identity, a file written before the reader started (less the slack)
        // is an earlier run's; one written since is this run's.
        publish(&path, 4, NO_RUN, &id).unwrap();
        let hour = Duration::from_secs(3600);
        let now = SystemTime::now();
        let old = std::fs::File::options().write(true).open(&path).unwrap();
        old.set_modified(now - hour).unwrap();
        let earlier = wait(4, NO_RUN, 1, Some(now - FILE_SLACK), 100).unwrap_err();
        assert!(
            earlier.to_string().contains("FERROCUDA_RUN_ID"),
            "{earlier}"
        );
        assert_eq!(wait(4, NO_RUN, 1, Some(now - 2 * hour), 100).unwrap(), id);
        // Rank 0 removes the earlier run's file before it makes the id.
        let zero = Launch {
            rank: 0,
            size: 4,
            local: 0,
            source: "RANK",
        };
        let place = Place::File(path.clone());
        let made = share_id(&place, &zero, NO_RUN, Duration::from_secs(1), || {
            assert!(!path.exists(), "the earlier run's file is still there");
            Ok(UniqueId([8; 128]))
        });
        assert_eq!(made.unwrap(), UniqueId([8; 128]));
        assert_eq!(
            wait(4, NO_RUN, 1, Some(now), 100).unwrap(),
            UniqueId([8; 128])
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn this_processs_start_is_read_and_before_now() {
        let start = started().expect("Linux's /proc says when this process started");
        let age = SystemTime::now().duration_since(start).unwrap();
        assert!(age < Duration::from_secs(24 * 3600), "{age:?}");
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
        // mpirun inside a Slurm allocation: mpirun's numbering is the team's.
        let both: Vec<_> = slurm.iter().chain(&mpi).copied().collect();
        assert_eq!(got(&both).unwrap(), (6, 7, 0, "OMPI_COMM_WORLD_RANK"));
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
            (
                &[("RANK", "0"), ("WORLD_SIZE", "1000000000000")][..],
                "WORLD_SIZE=1000000000000 is more ranks than a run may have (65536)",
            ),
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

    #[test]
    fn a_bare_host_and_port_is_refused_with_both_spellings() {
        for bare in ["node7:29600", "10.0.0.1:29500", ""] {
            let err = Place::from_vars(vars(&[("FERROCUDA_RENDEZVOUS", bare)]))
                .unwrap_err()
                .to_string();
            assert!(err.contains("tcp://") && err.contains("file://"), "{err}");
        }
        assert_eq!(
            Place::from_vars(vars(&[("FERROCUDA_RENDEZVOUS", "./run:1/id")])).unwrap(),
            Place::File("./run:1/id".into())
        );
    }

    #[test]
    fn an_ipv6_host_is_in_brackets() {
        let place = |set: &[(&str, &str)]| Place::from_vars(vars(set));
        assert_eq!(
            place(&[("FERROCUDA_RENDEZVOUS", "tcp://[::1]:29600")]).unwrap(),
            Place::Tcp("[::1]:29600".into())
        );
        assert_eq!(
            place(&[("MASTER_ADDR", "fe80::1"), ("MASTER_PORT", "29500")]).unwrap(),
            Place::Tcp("[fe80::1]:29500".into())
        );
        for bad in ["tcp://::1:29600", "tcp://[node7]:29600", "tcp://[::1:29600"] {
            let err = place(&[("FERROCUDA_RENDEZVOUS", bad)])
                .unwrap_err()
                .to_string();
            assert!(err.contains("in brackets: [::1]:29600"), "{err}");
        }
    }

    #[test]
    fn under_torchrun_the_masters_port_is_torchruns_store() {
        let master = [("MASTER_ADDR", "10.0.0.1"), ("MASTER_PORT", "29500")];
        for torchrun in ["TORCHELASTIC_RUN_ID", "TORCHELASTIC_RESTART_COUNT"] {
            let set: Vec<_> = master.iter().copied().chain([(torchrun, "0")]).collect();
            let err = Place::from_vars(vars(&set)).unwrap_err().to_string();
            assert!(
                err.contains(torchrun) && err.contains("FERROCUDA_RENDEZVOUS=tcp://host:port"),
                "{err}"
            );
            let named: Vec<_> = set
                .iter()
                .copied()
                .chain([("FERROCUDA_RENDEZVOUS", "tcp://10.0.0.1:29600")])
                .collect();
            assert!(Place::from_vars(vars(&named)).is_ok());
        }
    }

    #[test]
    fn a_run_is_told_by_its_launchs_identity_only() {
        let token = |set: &[(&str, &str)]| run_token(vars(set));
        assert_eq!(token(&[("MASTER_ADDR", "a"), ("MASTER_PORT", "1")]), NO_RUN);
        assert_eq!(token(&[("TORCHELASTIC_RUN_ID", "none")]), NO_RUN);
        let slurm = [("SLURM_JOB_ID", "7"), ("SLURM_STEP_ID", "0")];
        assert_eq!(token(&slurm), "7:0");
        let mpi: Vec<_> = slurm
            .iter()
            .copied()
            .chain([("PMIX_NAMESPACE", "ns 1")])
            .collect();
        assert_eq!(token(&mpi), "ns_1");
    }

    #[test]
    fn a_launch_beyond_the_largest_run_is_refused_before_anything_is_made() {
        let huge = Launch {
            rank: 1,
            size: 1 << 40,
            local: 0,
            source: "RANK",
        };
        let place = Place::Tcp("127.0.0.1:1".into());
        let err = share_id(&place, &huge, NO_RUN, Duration::from_millis(1), || {
            Ok(UniqueId([0; 128]))
        });
        assert!(err.unwrap_err().to_string().contains("at most 65536"));
    }
}
