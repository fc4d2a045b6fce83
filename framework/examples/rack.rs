//! One Skein program over the ranks of an `mpirun` job: `main` runs once (on rank 0), starts
//! a fiber on every worker of every rank, and every rank returns the same result.
//!
//! ```sh
//! bash scripts/install-mpi.sh
//! cargo build --release -p skein --features mpi --example rack
//! mpirun --allow-run-as-root --oversubscribe --bind-to none -np 2 target/release/examples/rack
//! ```
//!
//! Without `mpirun` (or without the `mpi` feature) it runs on one rank.

fn main() -> Result<(), skein::Error> {
    let rt = skein::Runtime::builder().workers(2).build()?;
    let placed = rt.run(|| {
        let fibers: Vec<_> = (0..skein::num_workers())
            .map(|g| {
                // A closure that travels captures nothing: its data is the argument.
                skein::spawn_on(g, g, |g| (g, skein::rank(), std::process::id()))
            })
            .collect();
        let placed: Vec<_> = fibers.into_iter().map(|f| f.join()).collect();
        // Every fiber started above has finished; nothing else is running anywhere.
        skein::wait_quiescent();
        placed
    })?;
    // A property on the last worker (of the last rank), used from `main` on rank 0: the
    // requests travel as bytes, the property is dropped on its trustee when the handle goes.
    let sum = rt.run(|| {
        let last = skein::num_workers() - 1;
        let counter = skein::trustee(last).entrust_new(0u64, |v| v);
        for k in 1..=100u64 {
            counter.apply_then(k, |c, k| *c += k, |()| ());
        }
        counter.apply((), |c, ()| (*c, skein::rank()))
    })?;
    // The same values on every rank; rank 0 prints them.
    if skein::rank() == 0 {
        for (g, rank, pid) in placed {
            println!("worker {g}: rank {rank}, process {pid}");
        }
        println!("sum 1..=100 = {} (kept on rank {})", sum.0, sum.1);
    }
    Ok(())
}
