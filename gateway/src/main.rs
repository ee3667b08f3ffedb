//! rmq-gateway: the Amazon SQS API (AWS JSON 1.0) over RMQ queues. The contract is
//! docs/gateway.md; the differences from SQS are listed in the README.

mod actions;
mod cli_args;
mod first_receive;
#[cfg(test)]
mod gateway_layout_tests;
// The layout tests' source reader, shared with the module's (src/layout_tests.rs).
mod gateway_state;
mod https;
#[cfg(test)]
#[path = "../../src/layout_paths.rs"]
mod layout_paths;
mod metrics;
mod movetask;
mod pool;
mod queue;
mod queue_replies;
mod receipt_handles;
mod redis_backend;
mod redis_client;
mod redrive;
mod replies;
mod rmq_client;
mod server;
mod startup;
mod stored_size;

// The pure parts live in the library (src/lib.rs), which the fuzz targets call too.
use rmq_gateway::{
    errors, gateway_keys, input, md5s, message, message_requests, move_task_requests, queue_attribute_checks, queue_requests,
    request_admission, request_fields, rmq_kind, sigv4, sqs_requests, tag_requests,
};

use std::process::ExitCode;

use clap::Parser;

use cli_args::Args;

/// mimalloc: a request allocates and frees many small buffers (headers, JSON values,
/// Redis replies); glibc's malloc spent a fifth of the gateway's instructions on them.
#[global_allocator]
static ALLOC: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Lifts the soft limit on open files to the hard one: the gateway holds up to 10,000
/// connections (and its Redis ones), past the common default of 1,024.
fn raise_fd_limit() {
    let mut l = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: getrlimit and setrlimit only read and write the struct passed.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut l) == 0 && l.rlim_cur < l.rlim_max {
            l.rlim_cur = l.rlim_max;
            libc::setrlimit(libc::RLIMIT_NOFILE, &l);
        }
    }
}

fn main() -> ExitCode {
    let args = Args::parse();
    raise_fd_limit();
    startup::init_logs(startup::describe(&args.redis_urls()));
    // Every file is read before Redis is waited for: a wrong one is said at once.
    let files = redis_client::Access::new(&args.redis_urls(), &args.tls_files(), |k| std::env::var(k).ok()).and_then(|access| {
        match (&args.tls_cert, &args.tls_key) {
            (Some(cert), Some(key)) => Ok((access, Some(https::acceptor(cert, key)?))),
            _ => Ok((access, None)),
        }
    });
    let (access, tls) = match files {
        Ok(f) => f,
        Err(e) => {
            eprintln!("rmq-gateway: {e}");
            return ExitCode::FAILURE;
        }
    };
    // One thread: the runtime's own, rather than a worker woken by the thread that waits on it.
    let mut builder = match args.threads.map(|n| n.get()) {
        Some(1) => tokio::runtime::Builder::new_current_thread(),
        Some(n) => {
            let mut b = tokio::runtime::Builder::new_multi_thread();
            b.worker_threads(n);
            b
        }
        None => tokio::runtime::Builder::new_multi_thread(),
    };
    let runtime = match builder.enable_all().build() {
        Ok(r) => r,
        Err(e) => {
            eprintln!("rmq-gateway: cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let (urls, cluster) = (args.redis_urls(), args.cluster.is_some());
    match runtime.block_on(async move {
        startup::check(&urls, cluster, &access).await?;
        server::run(args, access, tls).await
    }) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("rmq-gateway: {e}");
            ExitCode::FAILURE
        }
    }
}
