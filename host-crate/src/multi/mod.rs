//! Beyond one GPU: an array cut into one contiguous shard per rank ([`Shards`],
//! [`ShardedArray`]) of a [`Team`], its reductions, the reproducible sum whose bits do not
//! depend on how many ranks computed it ([`sum_reproducible`]), and the iterated 1D stencil
//! with halo exchanges overlapped with the interior ([`apply_sharded`]).
//!
//! The decomposition is written for any number of ranks, in any number of processes. Between
//! GPUs the ranks talk through NCCL ([`nccl`], loaded at run time); **virtual ranks** on one
//! GPU ([`Team::virtual_ranks`]) talk through device copies: that is how the decomposition is
//! tested on one GPU, not a way to use several.
pub mod nccl;
pub mod rendezvous;
mod shard;
mod sharded;
mod stencil;
mod team;

pub use shard::Shards;
pub use sharded::{ShardedArray, sum_reproducible};
pub use stencil::{PassTrace, ShardedStencil, apply_sharded};
pub use team::{MAX_VIRTUAL_RANKS, Team, Transport};
