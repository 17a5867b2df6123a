//! Beyond one GPU: an array cut into one contiguous shard per rank ([`Shards`],
//! [`ShardedArray`]), its reductions, and the reproducible sum whose bits do not depend on how
//! many ranks computed it ([`sum_reproducible`]), and the iterated 1D stencil with halo
//! exchanges ([`apply_sharded`]).
//!
//! The decomposition is written for any number of ranks. Its first transport is **virtual
//! ranks** on one GPU: every shard in its own buffer on the same device, the collectives device
//! copies. That is how it is tested on one GPU; it is not a way to use several.
mod shard;
mod sharded;
mod stencil;

pub use shard::Shards;
pub use sharded::{ShardedArray, sum_reproducible};
pub use stencil::apply_sharded;
