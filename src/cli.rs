//! The command line: `weir run`, `weir check`, `weir reload`, `weir demo`,
//! and what a package installs beside the binary (`weir man`, `weir
//! completions`).

// The command line is the one place that prints.
#![allow(clippy::print_stdout, clippy::print_stderr)]

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

mod keys;
mod reload;
mod teams;

use crate::config::{Config, Problems};
use crate::demo::{self, DemoPorts};
use crate::listen::budget;
use crate::server;
use crate::systemd;
use crate::telemetry;

#[derive(Parser, Debug)]
#[command(
    name = "weir",
    version,
    about = "An edge reverse proxy and LLM API gateway that keeps serving under overload"
)]
pub(crate) struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Serve with a configuration file.
    Run {
        #[arg(short, long, value_name = "FILE")]
        config: PathBuf,
    },
    /// Validate a configuration file offline and report every problem.
    Check {
        #[arg(short, long, value_name = "FILE")]
        config: PathBuf,
    },
    /// Ask the running weir to reload its configuration (through its admin
    /// API) and print the result: the new generation, or every problem.
    Reload {
        #[arg(short, long, value_name = "FILE")]
        config: PathBuf,
        /// The admin API's address, instead of the config's `[admin] address`.
        #[arg(long, value_name = "ADDR")]
        admin: Option<std::net::SocketAddr>,
        /// A file holding the admin token, instead of the config's.
        #[arg(long, value_name = "FILE")]
        token_file: Option<PathBuf>,
    },
    /// Issue, list, change, rotate and revoke runtime keys (through the
    /// running weir's admin API; needs `[database]`).
    Keys {
        #[command(flatten)]
        target: keys::AdminTarget,
        #[command(subcommand)]
        action: keys::KeysAction,
    },
    /// Create, list, show, change and delete teams' policies kept in the
    /// database (through the running weir's admin API; needs
    /// `[database]`): budgets the team shares, models, routes and each
    /// member's limits. A team in the config's `[[teams]]` or
    /// `[[idp.teams]]` is the config's and is refused.
    Teams {
        #[command(flatten)]
        target: keys::AdminTarget,
        #[command(subcommand)]
        action: teams::TeamsAction,
    },
    /// Report LLM usage from the database, grouped (through the admin API).
    Usage {
        #[command(flatten)]
        target: keys::AdminTarget,
        /// What to group by: key, client, person (user), team, route,
        /// model, upstream, session, agent, day; comma-separated.
        #[arg(long, default_value = "user")]
        by: String,
        /// The period: from this long ago until now.
        #[arg(long, default_value = "30d")]
        since: String,
        /// Comma-separated values instead of a table.
        #[arg(long)]
        csv: bool,
    },
    /// The database of `[database]`: `weir db migrate` brings its schema up
    /// to this binary's (as `weir run` does at start) and exits.
    Db {
        #[command(subcommand)]
        action: DbAction,
    },
    /// Run a self-contained demo: HTTP, HTTPS (HTTP/2), admin, and a built-in upstream.
    Demo {
        #[arg(long, default_value_t = 8080)]
        http_port: u16,
        #[arg(long, default_value_t = 8443)]
        https_port: u16,
        #[arg(long, default_value_t = 9900)]
        admin_port: u16,
    },
    /// Print the man page (roff) to standard output.
    Man,
    /// Print completions for a shell to standard output.
    Completions {
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
}

#[derive(Subcommand, Debug)]
enum DbAction {
    /// Run the schema's migrations (under PostgreSQL's advisory lock, so
    /// safe beside starting instances) and exit.
    Migrate {
        #[arg(short, long, value_name = "FILE")]
        config: PathBuf,
    },
}

/// Parse arguments and run the chosen command.
pub fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Man => print_man(),
        Command::Completions { shell } => {
            let mut command = <Cli as clap::CommandFactory>::command();
            clap_complete::generate(shell, &mut command, "weir", &mut std::io::stdout());
            ExitCode::SUCCESS
        }
        Command::Check { config } => match load(&config) {
            Ok((_, warnings)) => {
                for w in warnings {
                    eprintln!("warning: {w}");
                }
                println!("config ok");
                ExitCode::SUCCESS
            }
            Err(problems) => {
                eprint!("{problems}");
                ExitCode::from(2)
            }
        },
        Command::Reload {
            config,
            admin,
            token_file,
        } => reload_running(&config, admin, token_file.as_deref()),
        Command::Keys { target, action } => {
            match admin_of(&target.config, target.admin, target.token_file.as_deref()) {
                Ok(to) => keys::keys(&action, to),
                Err(e) => {
                    eprintln!("weir keys: {e}");
                    ExitCode::FAILURE
                }
            }
        }
        Command::Teams { target, action } => {
            match admin_of(&target.config, target.admin, target.token_file.as_deref()) {
                Ok(to) => teams::teams(&action, to),
                Err(e) => {
                    eprintln!("weir teams: {e}");
                    ExitCode::FAILURE
                }
            }
        }
        Command::Usage {
            target,
            by,
            since,
            csv,
        } => match admin_of(&target.config, target.admin, target.token_file.as_deref()) {
            Ok(to) => keys::usage(&by, &since, csv, to),
            Err(e) => {
                eprintln!("weir usage: {e}");
                ExitCode::FAILURE
            }
        },
        Command::Db {
            action: DbAction::Migrate { config },
        } => migrate(&config),
        Command::Run { config } => match load(&config) {
            Ok((config, warnings)) => serve(config, warnings),
            Err(problems) => {
                eprint!("{problems}");
                ExitCode::from(2)
            }
        },
        Command::Demo {
            http_port,
            https_port,
            admin_port,
        } => {
            let ports = DemoPorts {
                http: http_port,
                https: https_port,
                admin: admin_port,
            };
            let Some(runtime) = runtime() else {
                return ExitCode::FAILURE;
            };
            let upstreams = runtime.block_on(demo::upstreams());
            let config = upstreams
                .map_err(|e| format!("demo upstream: {e}"))
                .and_then(|up| demo::config(ports, &up).map_err(|e| e.to_string()));
            let checked = config.and_then(|c| {
                let warnings = fd_budget(&c).map_err(|p| p.to_string())?;
                Ok((c, warnings))
            });
            match checked {
                Ok((config, warnings)) => serve_on(runtime, config, warnings, true),
                Err(e) => {
                    eprintln!("weir demo: {e}");
                    ExitCode::FAILURE
                }
            }
        }
    }
}

/// The runtime `main` blocks on: signals, the admin API and the sweeper
/// run here (a reload on its blocking pool), and with one worker the
/// connections too. More
/// workers get a thread and a runtime each (see [`crate::worker`]), so
/// this one never needs work-stealing either.
fn runtime() -> Option<tokio::runtime::Runtime> {
    match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => Some(rt),
        Err(e) => {
            eprintln!("weir: cannot start the runtime: {e}");
            None
        }
    }
}

/// `weir reload`: 0 when the running weir runs the new config, 1 when it
/// refused it (the problems are printed) or could not be asked.
fn reload_running(
    config: &std::path::Path,
    admin: Option<std::net::SocketAddr>,
    token_file: Option<&std::path::Path>,
) -> ExitCode {
    let target = admin_of(config, admin, token_file);
    let outcome = target.and_then(|(addr, token)| reload::reload(addr, &token));
    match outcome {
        Ok(reload::Outcome::Reloaded {
            generation,
            restart_needed,
        }) => {
            println!("reloaded: generation {generation}");
            for field in restart_needed {
                println!("note: `{field}` changed and takes effect only after a restart");
            }
            ExitCode::SUCCESS
        }
        Ok(reload::Outcome::Refused(problems)) => {
            eprintln!("reload refused; the running config stays:");
            for p in problems {
                eprintln!("  {p}");
            }
            ExitCode::FAILURE
        }
        Err(e) => {
            eprintln!("weir reload: {e}");
            ExitCode::FAILURE
        }
    }
}

/// `weir db migrate`: 0 when the database's schema is this binary's, 1
/// when it could not be brought there, 2 for a bad config.
fn migrate(config: &std::path::Path) -> ExitCode {
    let loaded = match Config::load(config) {
        Ok(c) => c,
        Err(problems) => {
            eprint!("{problems}");
            return ExitCode::from(2);
        }
    };
    let Some(database) = &loaded.database else {
        eprintln!("weir db migrate: the config has no `[database]` table");
        return ExitCode::from(2);
    };
    let Some(runtime) = runtime() else {
        return ExitCode::FAILURE;
    };
    match runtime.block_on(crate::store::Store::open(&database.url)) {
        Ok(_) => {
            println!(
                "database {}: schema at step {}",
                database.url.shown(),
                crate::store::Store::schema_step()
            );
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("weir db migrate: {e}");
            ExitCode::FAILURE
        }
    }
}

/// The admin API to ask and its token: from the flags, else from the
/// config's `[admin]` table.
fn admin_of(
    config: &std::path::Path,
    admin: Option<std::net::SocketAddr>,
    token_file: Option<&std::path::Path>,
) -> Result<(std::net::SocketAddr, crate::config::Secret), String> {
    let flag_token = match token_file {
        Some(f) => Some(crate::config::Secret(
            std::fs::read_to_string(f)
                .map_err(|e| format!("{}: {e}", f.display()))?
                .trim()
                .to_string(),
        )),
        None => None,
    };
    if let (Some(addr), Some(token)) = (admin, &flag_token) {
        return Ok((addr, token.clone()));
    }
    // The config as this shell sees it: a `${VAR}` only the service's
    // environment sets is a problem here, hence the flags.
    let loaded = Config::load(config).map_err(|p| {
        format!("{p}the admin address and token are read from the config: fix it, or pass --admin and --token-file")
    })?;
    let settings = loaded.admin.as_ref();
    let addr = admin.or(settings.map(|a| a.address)).ok_or_else(|| {
        "the config has no `[admin]` table: add one with a `token_file`, or send SIGHUP (`systemctl reload weir`)".to_string()
    })?;
    let token = flag_token
        .or_else(|| settings.and_then(|a| a.token.clone()))
        .ok_or_else(|| {
            "`[admin]` has no token: set `token_file` (or pass --token-file)".to_string()
        })?;
    if addr.port() == 0 {
        return Err(
            "`[admin] address` has port 0: pass the running admin API's address with --admin"
                .into(),
        );
    }
    Ok((addr, token))
}

/// Load and validate a config, including the descriptor budget under this
/// process's (raised) limits, so `check` and `run` agree.
fn load(path: &std::path::Path) -> Result<(Config, Vec<String>), Problems> {
    let config = Config::load(path)?;
    let mut warnings = config.warnings.clone();
    warnings.extend(fd_budget(&config).map_err(|p| Problems(vec![p]))?);
    Ok((config, warnings))
}

fn fd_budget(config: &Config) -> Result<Vec<String>, crate::config::Problem> {
    budget::check(config, budget::raise_nofile_limit())
}

fn serve(config: Config, warnings: Vec<String>) -> ExitCode {
    let Some(runtime) = runtime() else {
        return ExitCode::FAILURE;
    };
    serve_on(runtime, config, warnings, false)
}

fn serve_on(
    runtime: tokio::runtime::Runtime,
    config: Config,
    warnings: Vec<String>,
    demo_banner: bool,
) -> ExitCode {
    if let Err(e) = telemetry::init_logging(&config.log) {
        eprintln!("weir: {e}");
        return ExitCode::FAILURE;
    }
    for w in warnings {
        tracing::warn!("{w}");
    }
    let code = runtime.block_on(async {
        // Before anything serves: a signal that arrives once the listeners
        // are up must drain, not kill the process by its default action.
        let mut signals = match Signals::new() {
            Ok(s) => s,
            Err(e) => {
                eprintln!("weir: cannot install signal handlers: {e}");
                return ExitCode::FAILURE;
            }
        };
        let running = match server::start(&config).await {
            Ok(r) => r,
            Err(e) => {
                tracing::error!("{e}");
                eprintln!("weir: {e}");
                return ExitCode::FAILURE;
            }
        };
        if demo_banner {
            println!("{}", demo::try_these(&running));
        }
        systemd::ready();
        if let Some(every) = systemd::watchdog_interval() {
            tokio::spawn(async move {
                let mut tick = tokio::time::interval(every);
                loop {
                    tick.tick().await;
                    systemd::watchdog();
                }
            });
        }
        // SIGHUP reloads the config file, SIGUSR1 reopens log files,
        // SIGUSR2 hands over to a new binary; SIGTERM/SIGINT start the drain.
        let mut handed_over = false;
        loop {
            match signals.next().await {
                Signal::Reload => {
                    // Off this runtime, which may also be serving; the
                    // outcome is logged by the reload itself.
                    let _ = running.reload().await;
                }
                Signal::ReopenLogs => reopen_logs(),
                Signal::Upgrade => {
                    tracing::info!("upgrade: starting the new process with the listening sockets");
                    match running.upgrade().await {
                        Ok(pid) => {
                            tracing::info!(
                                pid,
                                "upgrade: the new process is ready; this one drains and exits"
                            );
                            handed_over = true;
                            break;
                        }
                        Err(e) => tracing::error!(error = %e, "upgrade failed; still serving"),
                    }
                }
                Signal::Stop => break,
            }
        }
        // After a handover the service is not stopping: its new main
        // process is serving.
        if !handed_over {
            systemd::stopping();
        }
        tracing::info!("shutdown requested; a second signal exits at once");
        tokio::select! {
            _ = running.shutdown() => ExitCode::SUCCESS,
            _ = signals.next_stop() => {
                tracing::warn!("second signal: exiting without draining");
                ExitCode::from(130)
            }
        }
    });
    // Do not wait for tasks (tunnels, pooled connections) still running.
    runtime.shutdown_background();
    // The last lines (the drained requests' access lines among them) are
    // still queued for the log writers' threads.
    telemetry::logfile::flush_all();
    code
}

/// Reopen log files after logrotate moved them.
fn reopen_logs() {
    let problems = telemetry::logfile::reopen_all();
    if problems.is_empty() {
        tracing::info!("log files reopened");
    }
    for p in problems {
        tracing::error!(problem = %p, "cannot reopen a log file");
    }
}

/// What a signal asks for.
#[derive(Debug, PartialEq, Eq)]
enum Signal {
    /// SIGTERM or SIGINT.
    Stop,
    /// SIGHUP.
    Reload,
    /// SIGUSR1.
    ReopenLogs,
    /// SIGUSR2: hand the sockets to a new process, then drain.
    Upgrade,
}

struct Signals {
    term: tokio::signal::unix::Signal,
    int: tokio::signal::unix::Signal,
    hup: tokio::signal::unix::Signal,
    usr1: tokio::signal::unix::Signal,
    usr2: tokio::signal::unix::Signal,
}

impl Signals {
    fn new() -> std::io::Result<Self> {
        use tokio::signal::unix::{SignalKind, signal};
        Ok(Signals {
            term: signal(SignalKind::terminate())?,
            int: signal(SignalKind::interrupt())?,
            hup: signal(SignalKind::hangup())?,
            usr1: signal(SignalKind::user_defined1())?,
            usr2: signal(SignalKind::user_defined2())?,
        })
    }

    async fn next(&mut self) -> Signal {
        tokio::select! {
            _ = self.term.recv() => Signal::Stop,
            _ = self.int.recv() => Signal::Stop,
            _ = self.hup.recv() => Signal::Reload,
            _ = self.usr1.recv() => Signal::ReopenLogs,
            _ = self.usr2.recv() => Signal::Upgrade,
        }
    }

    /// The next SIGTERM or SIGINT (a SIGHUP or SIGUSR1 while draining does
    /// nothing).
    async fn next_stop(&mut self) {
        while self.next().await != Signal::Stop {}
    }
}

/// The man page, made from the same definitions as `--help`.
fn print_man() -> ExitCode {
    let command = <Cli as clap::CommandFactory>::command();
    match clap_mangen::Man::new(command).render(&mut std::io::stdout()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("weir: cannot write the man page: {e}");
            ExitCode::FAILURE
        }
    }
}
