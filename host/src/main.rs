//! The `agent` binary: the CLI's edge, where errors become messages and exit codes.

use clap::Parser;

#[tokio::main]
async fn main() {
    let args = paddock::cli::normalize_args(std::env::args());
    let cli = paddock::cli::Cli::parse_from(args);
    match paddock::cli::main(cli).await {
        Ok(code) => std::process::exit(code),
        Err(e) => {
            eprintln!("Error: {e:#}");
            std::process::exit(1);
        }
    }
}
