# PyTorch's per-call cost of the sharded sum, for `ferrocuda multi` (embedded in the binary and
# fed to `python3 - WORLD N_PER_RANK CALLS RENDEZVOUS`): WORLD processes, one per GPU (NCCL
# backend, `file://` rendezvous), each with N_PER_RANK f32 ones on its GPU; a call is the local
# `x.sum()`, `torch.distributed.all_reduce` of that one scalar, and `.item()` (the result on the
# host, as ferrocuda's `ShardedArray::sum` returns it). 30 warm-up calls, then CALLS calls each
# timed with time.perf_counter; rank 0 prints
#   torch <version> nccl <major.minor.patch>
#   torch sum+all_reduce <world> <n_per_rank> <median_us> <result>
import os
import statistics
import sys
import time

os.environ.setdefault("NCCL_NVLS_ENABLE", "0")


def run(rank, world, n, calls, rendezvous):
    import torch
    import torch.distributed as dist

    torch.cuda.set_device(rank)
    dist.init_process_group(
        "nccl", init_method="file://" + rendezvous, rank=rank, world_size=world
    )
    x = torch.ones(n, dtype=torch.float32, device="cuda")

    def call():
        s = x.sum()
        dist.all_reduce(s)
        return s.item()

    for _ in range(30):
        call()
    samples = []
    for _ in range(calls):
        dist.barrier()
        start = time.perf_counter()
        result = call()
        samples.append((time.perf_counter() - start) * 1e6)
    if rank == 0:
        v = torch.cuda.nccl.version()
        print(f"torch {torch.__version__} nccl {'.'.join(str(p) for p in v)}")
        print(
            f"torch sum+all_reduce {world} {n} {statistics.median(samples):.2f} {result:.1f}"
        )
    dist.destroy_process_group()


if __name__ == "__main__":
    world, n, calls, rendezvous = (
        int(sys.argv[1]),
        int(sys.argv[2]),
        int(sys.argv[3]),
        sys.argv[4],
    )
    if world == 1:
        run(0, 1, n, calls, rendezvous)
    else:
        import torch.multiprocessing as mp

        mp.start_processes(
            run, args=(world, n, calls, rendezvous), nprocs=world, start_method="fork"
        )
