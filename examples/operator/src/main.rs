//! `migrate-operator`: runs background-tier migrations one at a time, each
//! in a Job, from the image named by the index ConfigMap. See the README
//! and `examples/operator/deploy/` for the manifests it needs.

use std::io::IsTerminal;
use std::net::SocketAddr;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use clap::Parser;
use migrate_operator::{
    Context, CrdConditions, JobBounds, JobPod, Leadership, LedgerObject, OPERATOR_NAME,
    OperatorConfig, Retries, STATUS_NAME, metrics, parse_job_pod, parse_resources, run_controller,
};
use migrate_shared::{KubeOptions, LedgerSpec, OpenOptions};
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
    /// Name of the status ConfigMap the operator writes (its condition and
    /// the attempt history), in the same namespace.
    #[arg(long, default_value = STATUS_NAME)]
    status: String,
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
    /// Each Job's activeDeadlineSeconds: a Job running longer fails and
    /// counts as a failed attempt (0: no deadline).
    #[arg(long, default_value_t = 3600)]
    job_active_deadline: u64,
    /// Each Job's ttlSecondsAfterFinished (0: finished Jobs are kept).
    #[arg(long, default_value_t = 604_800)]
    job_ttl: u64,
    /// Each Job container's resources, as JSON:
    /// {"requests":{"cpu":"10m","memory":"32Mi"},"limits":{"memory":"256Mi"}}
    /// (the default); "{}" sets none.
    #[arg(long)]
    job_resources: Option<String>,
    /// Each Job pod's settings, as JSON with any of imagePullSecrets,
    /// imagePullPolicy, nodeSelector, tolerations, securityContext (the
    /// pod's), containerSecurityContext and annotations (the pod's), each in
    /// the shape a pod spec gives it; the chart passes its pod values here.
    #[arg(long)]
    job_pod: Option<String>,
    /// Where to serve Prometheus metrics (GET /metrics); "off" serves none.
    #[arg(long, default_value = "0.0.0.0:9090")]
    metrics_address: String,
    /// This replica's identity for leader election (default: $POD_NAME).
    #[arg(long, env = "POD_NAME")]
    identity: Option<String>,
    /// Leader Lease name.
    #[arg(long, default_value = OPERATOR_NAME)]
    leader_lease: String,
}

/// Bad flags, refused before anything connects.
fn settings(cli: &Cli) -> Result<(JobBounds, JobPod, Option<SocketAddr>), String> {
    let seconds = |s: u64| (s > 0).then(|| Duration::from_secs(s));
    let resources = match cli.job_resources.as_deref() {
        None => Some(migrate_operator::default_resources()),
        Some(text) => Some(parse_resources(text).map_err(|e| e.to_string())?),
    };
    let bounds = JobBounds {
        active_deadline: seconds(cli.job_active_deadline),
        ttl_after_finished: seconds(cli.job_ttl),
        resources,
    };
    if cli.job_ttl > i32::MAX as u64 {
        return Err(format!(
            "--job-ttl {}: more than Kubernetes' {} seconds",
            cli.job_ttl,
            i32::MAX
        ));
    }
    let metrics =
        match cli.metrics_address.as_str() {
            "off" => None,
            text => Some(text.parse().map_err(|e| {
                format!("--metrics-address {text:?}: {e} (expected HOST:PORT or off)")
            })?),
        };
    let pod = match cli.job_pod.as_deref() {
        None => JobPod::default(),
        Some(text) => parse_job_pod(text).map_err(|e| e.to_string())?,
    };
    Ok((bounds, pod, metrics))
}

/// Asks the API server, before campaigning, whether every right the
/// operator uses is granted, and says each one that is not (a warning
/// naming the verb and the resource, the `MissingRights` condition and
/// Event): a replica that may not take its Lease would otherwise wait in
/// silence.
async fn check_rights(client: &kube::Client, ctx: &Context, lease: &str) {
    let needed = migrate_operator::rights::needed(&ctx.config, lease);
    match migrate_operator::rights::missing(client, &needed).await {
        Ok(missing) if missing.is_empty() => {
            tracing::info!(
                rights = needed.len(),
                "every right the operator uses is granted"
            );
        }
        Ok(missing) => {
            for right in &missing {
                tracing::warn!("missing right: {right}");
            }
            let list: Vec<String> = missing.iter().map(ToString::to_string).collect();
            let message = format!(
                "missing right(s): {} (see the chart's Role, or examples/operator/deploy/rbac.yaml)",
                list.join("; ")
            );
            migrate_operator::missing_rights(ctx, message).await;
        }
        Err(e) => {
            tracing::warn!(error = %e, "cannot check the operator's rights (SelfSubjectAccessReview)")
        }
    }
}

/// Completes on SIGTERM (what the kubelet sends) or SIGINT.
async fn shutdown_signal() {
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(e) => {
                tracing::warn!(error = %e, "cannot listen for SIGTERM");
                std::future::pending::<()>().await;
            }
        }
    };
    tokio::select! {
        () = term => {}
        _ = tokio::signal::ctrl_c() => {}
    }
    tracing::info!("signal received; stopping");
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("MIGRATE_LOG")
                .unwrap_or_else(|_| "info".into()),
        )
        .with_writer(std::io::stderr)
        // Colour codes only for a person at a terminal: in a file or a pod
        // log they are noise around every field.
        .with_ansi(std::io::stderr().is_terminal())
        .init();
    let (bounds, pod, metrics_address) = match settings(&cli) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("migrate-operator: {e}");
            return ExitCode::from(migrate_shared::exit::BAD_INPUT);
        }
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("migrate-operator: cannot start the runtime: {e}");
            return ExitCode::from(migrate_shared::exit::ENVIRONMENT);
        }
    };
    runtime.block_on(async move {
        let client = match migrate_operator::client::infer().await {
            Ok(c) => c,
            Err(e) => {
                eprintln!("migrate-operator: cannot reach the API server: {e}");
                return ExitCode::from(migrate_shared::exit::ENVIRONMENT);
            }
        };
        // The operator's ledger is on the cluster it runs in (no
        // --kubeconfig or --context of its own).
        let opened = match OpenOptions::for_spec(&cli.ledger, KubeOptions::default()) {
            Ok(options) => cli.ledger.open(&options).await,
            Err(e) => Err(e),
        };
        let ledger = match opened {
            Ok(l) => l,
            Err(e) => {
                eprintln!("migrate-operator: {e}");
                return ExitCode::from(migrate_shared::exit::ENVIRONMENT);
            }
        };
        let identity = cli
            .identity
            .unwrap_or_else(|| format!("migrate-operator/pid-{}", std::process::id()));
        let mut config = OperatorConfig::new(&cli.namespace);
        config.index_name = cli.index;
        config.status_name = cli.status;
        config.ledger_spec = cli.ledger.to_string();
        config.ledger_object = match &cli.ledger {
            LedgerSpec::ConfigMap { namespace, name } => Some(LedgerObject::ConfigMap {
                namespace: namespace.clone(),
                name: name.clone(),
            }),
            LedgerSpec::Crd { name } => Some(LedgerObject::Crd { name: name.clone() }),
            _ => None,
        };
        config.service_account = cli.service_account;
        config.retries = Retries {
            limit: cli.retry_limit.max(1),
            base: Duration::from_secs(cli.retry_base),
            cap: Duration::from_secs(cli.retry_cap),
        };
        config.bounds = bounds;
        config.pod = pod;
        let clock = Arc::new(SystemClock);
        let mut ctx = Context::new(client.clone(), ledger, config, clock.clone(), &identity);
        if let LedgerSpec::Crd { name } = &cli.ledger {
            ctx.conditions = Some(Arc::new(CrdConditions::new(ledger_crd::CrdLedger::new(
                client.clone(),
                name,
            ))));
        }
        let ctx = Arc::new(ctx);
        if let Some(addr) = metrics_address {
            match metrics::bind(addr).await {
                Ok(listener) => {
                    tracing::info!(address = %addr, "serving metrics at /metrics");
                    tokio::spawn(metrics::serve(listener, ctx.metrics.clone()));
                }
                Err(e) => {
                    eprintln!("migrate-operator: --metrics-address {addr}: {e}");
                    return ExitCode::from(migrate_shared::exit::ENVIRONMENT);
                }
            }
        }
        check_rights(&client, &ctx, &cli.leader_lease).await;
        let refused = {
            let ctx = ctx.clone();
            let f: migrate_operator::Refusal = Arc::new(move |text: String| {
                let ctx = ctx.clone();
                Box::pin(async move { migrate_operator::missing_rights(&ctx, text).await })
            });
            f
        };
        let leadership = Leadership::new(
            client,
            &cli.namespace,
            &cli.leader_lease,
            &identity,
            clock,
            Duration::from_secs(15),
        )
        .on_refusal(refused);
        tracing::info!(%identity, "starting; campaigning for leadership");
        leadership
            .run_until(|| run_controller(ctx.clone()), shutdown_signal())
            .await;
        ExitCode::from(migrate_shared::exit::SUCCESS)
    })
}
