fn main() -> std::process::ExitCode {
    skillcat::cli::main()
}
