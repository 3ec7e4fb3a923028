//! The meshd control plane: parse flags, start logging, run the app, map the outcome to an exit code.

fn main() -> std::process::ExitCode {
    let args = match meshd::cli::Args::try_parse_tracking_defaults(std::env::args_os()) {
        Ok(args) => args,
        Err(e) => e.exit(),
    };
    if let Err(e) = meshd::telemetry::init(&args.log_level, args.log_format) {
        eprintln!("meshd: {e}");
        return std::process::ExitCode::from(2);
    }
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_name("meshd")
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("meshd: cannot start the async runtime: {e}");
            return std::process::ExitCode::FAILURE;
        }
    };
    let format = args.log_format;
    match runtime.block_on(meshd::app::run(args)) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            let e = meshd::telemetry::error_chain(e.as_ref());
            // Once: a plain line for a person, or a JSON record for a log pipeline.
            match format {
                meshd::telemetry::LogFormat::Text => eprintln!("meshd: {e}"),
                meshd::telemetry::LogFormat::Json => tracing::error!("{e}"),
            }
            std::process::ExitCode::FAILURE
        }
    }
}
