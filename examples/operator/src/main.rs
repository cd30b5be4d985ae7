//! `migrate-operator`: runs background-tier migrations one at a time, each
//! in a Job, from the image named by the index ConfigMap. See the README
//! and `examples/operator/deploy/` for the manifests it needs.

use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use clap::Parser;
use migrate_operator::{
    Context, Leadership, OPERATOR_NAME, OperatorConfig, Retries, run_controller,
};
use migrate_spec::LedgerSpec;
use migration_core::SystemClock;
use migration_kube::defaults;

#[derive(Debug, Parser)]
#[command(
    name = "migrate-operator",
    version,
    about = "Runs background migrations one at a time, each in a Job"
)]
struct Cli {
    /// Namespace of the index ConfigMap, the Jobs and the leader Lease.
    #[arg(long, env = "MIGRATION_NAMESPACE", default_value = defaults::NAMESPACE)]
    namespace: String,
    /// Name of the index ConfigMap.
    #[arg(long, default_value = defaults::INDEX_NAME)]
    index: String,
    /// The ledger, for the operator and the Jobs it creates.
    #[arg(long, env = "MIGRATE_LEDGER", default_value = defaults::LEDGER_SPEC)]
    ledger: LedgerSpec,
    /// ServiceAccount the migration Jobs run as.
    #[arg(long, default_value = defaults::SERVICE_ACCOUNT)]
    service_account: String,
    /// Jobs tried per slug before recording it failed.
    #[arg(long, default_value_t = 3)]
    retry_limit: u32,
    /// Seconds to wait after the first failure (doubling after each further one).
    #[arg(long, default_value_t = 30)]
    retry_base: u64,
    /// Longest wait between retries, in seconds.
    #[arg(long, default_value_t = 600)]
    retry_cap: u64,
    /// This replica's identity for leader election (default: $POD_NAME).
    #[arg(long, env = "POD_NAME")]
    identity: Option<String>,
    /// Leader Lease name.
    #[arg(long, default_value = OPERATOR_NAME)]
    leader_lease: String,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("MIGRATE_LOG")
                .unwrap_or_else(|_| "info".into()),
        )
        .with_writer(std::io::stderr)
        .init();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("migrate-operator: cannot start the runtime: {e}");
            return ExitCode::from(migrate_spec::exit::ENVIRONMENT);
        }
    };
    runtime.block_on(async move {
        let client = match migration_kube::client::infer().await {
            Ok(c) => c,
            Err(e) => {
                eprintln!("migrate-operator: cannot reach the API server: {e}");
                return ExitCode::from(migrate_spec::exit::ENVIRONMENT);
            }
        };
        let ledger = match cli.ledger.open().await {
            Ok(l) => l,
            Err(e) => {
                eprintln!("migrate-operator: {e}");
                return ExitCode::from(migrate_spec::exit::ENVIRONMENT);
            }
        };
        let identity = cli
            .identity
            .unwrap_or_else(|| format!("migrate-operator/pid-{}", std::process::id()));
        let mut config = OperatorConfig::new(&cli.namespace);
        config.index_name = cli.index;
        config.ledger_spec = cli.ledger.to_string();
        config.service_account = cli.service_account;
        config.retries = Retries {
            limit: cli.retry_limit.max(1),
            base: Duration::from_secs(cli.retry_base),
            cap: Duration::from_secs(cli.retry_cap),
        };
        let clock = Arc::new(SystemClock);
        let ctx = Arc::new(Context::new(
            client.clone(),
            ledger,
            config,
            clock.clone(),
            &identity,
        ));
        let leadership = Leadership::new(
            client,
            &cli.namespace,
            &cli.leader_lease,
            &identity,
            clock,
            Duration::from_secs(15),
        );
        tracing::info!(%identity, "starting; campaigning for leadership");
        leadership.run(|| run_controller(ctx.clone())).await;
        ExitCode::from(migrate_spec::exit::SUCCESS)
    })
}
