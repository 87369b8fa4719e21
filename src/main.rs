#![forbid(unsafe_code)]

fn main() -> std::process::ExitCode {
    weir::cli::main()
}
