//! `--ledger SPEC`: which ledger backend to open.

use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;
use std::sync::Arc;

use ledger_file::FileLedger;
use ledger_memory::MemoryLedger;
use migration_core::LockedLedger;

/// A parsed `--ledger` value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LedgerSpec {
    /// `file:PATH`: the embedded default, a JSON file.
    File(PathBuf),
    /// `memory:`: an empty in-memory ledger, for dry runs.
    Memory,
    /// `configmap:NAMESPACE/NAME`: the ConfigMap ledger on the cluster that
    /// kubeconfig (or the in-cluster service account) points at.
    ConfigMap {
        /// The namespace.
        namespace: String,
        /// The ConfigMap's name.
        name: String,
    },
    /// `crd:NAME`: the cluster-scoped `MigrationLedger` custom resource
    /// (install its CRD first: `migrate crd | kubectl apply -f -`).
    Crd {
        /// The ledger object's name (the bundle).
        name: String,
    },
}

/// A DNS-1123 label (namespaces): at most 63 of `[a-z0-9-]`, alphanumeric at both ends.
pub fn is_dns_label(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 63
        && s.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !s.starts_with('-')
        && !s.ends_with('-')
}

/// A DNS-1123 subdomain (object names): dot-separated labels, at most 253.
pub fn is_dns_subdomain(s: &str) -> bool {
    !s.is_empty() && s.len() <= 253 && s.split('.').all(is_dns_label)
}

/// Why a `--ledger` value was rejected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "invalid ledger spec {input:?}: {reason} (expected file:PATH, memory:, configmap:NAMESPACE/NAME or crd:NAME)"
)]
pub struct SpecError {
    /// The rejected value, cut to a printable length.
    pub input: String,
    /// What is wrong.
    pub reason: String,
}

impl FromStr for LedgerSpec {
    type Err = SpecError;

    fn from_str(input: &str) -> Result<Self, Self::Err> {
        let bad = |reason: &str| SpecError {
            input: input.chars().take(120).collect(),
            reason: reason.to_owned(),
        };
        let Some((kind, rest)) = input.split_once(':') else {
            return Err(bad("no ':' after the backend name"));
        };
        match kind {
            "file" if rest.is_empty() => Err(bad("file: needs a path")),
            "file" if rest.contains('\0') => Err(bad("the path contains a NUL byte")),
            "file" => Ok(LedgerSpec::File(PathBuf::from(rest))),
            "memory" if rest.is_empty() => Ok(LedgerSpec::Memory),
            "memory" => Err(bad("memory: takes nothing after the colon")),
            "configmap" => {
                let (namespace, name) = rest
                    .split_once('/')
                    .ok_or_else(|| bad("configmap: needs NAMESPACE/NAME"))?;
                if !is_dns_label(namespace) {
                    return Err(bad("the namespace is not a DNS label"));
                }
                if !is_dns_subdomain(name) {
                    return Err(bad("the ConfigMap name is not a DNS subdomain"));
                }
                Ok(LedgerSpec::ConfigMap {
                    namespace: namespace.to_owned(),
                    name: name.to_owned(),
                })
            }
            "crd" if is_dns_subdomain(rest) => Ok(LedgerSpec::Crd {
                name: rest.to_owned(),
            }),
            "crd" => Err(bad("crd: needs a MigrationLedger name (a DNS subdomain)")),
            _ => Err(bad("unknown backend")),
        }
    }
}

impl fmt::Display for LedgerSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LedgerSpec::File(p) => write!(f, "file:{}", p.display()),
            LedgerSpec::Memory => f.write_str("memory:"),
            LedgerSpec::ConfigMap { namespace, name } => write!(f, "configmap:{namespace}/{name}"),
            LedgerSpec::Crd { name } => write!(f, "crd:{name}"),
        }
    }
}

/// `--kubeconfig` and `--context`, spelt as kubectl spells them: which
/// cluster the `configmap:` and `crd:` ledgers are on.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct KubeOptions {
    /// The kubeconfig file (`None`: `$KUBECONFIG`, `~/.kube/config`, then
    /// the in-cluster service account).
    pub kubeconfig: Option<PathBuf>,
    /// The context in it (`None`: its current context).
    pub context: Option<String>,
}

/// What opening a ledger takes besides its spec, given by the program
/// (from its flags and environment, [`OpenOptions::for_spec`]): opening
/// reads no global and no environment variable.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OpenOptions {
    /// Which cluster the `configmap:` and `crd:` ledgers are on.
    pub kube: KubeOptions,
    /// The `file:` ledger's size budget in bytes (`None`: unlimited).
    pub file_budget: Option<u64>,
}

impl Default for OpenOptions {
    /// The discovered cluster, and the file ledger's default budget
    /// ([`ledger_file::DEFAULT_FILE_BUDGET_BYTES`]).
    fn default() -> Self {
        OpenOptions {
            kube: KubeOptions::default(),
            file_budget: Some(ledger_file::DEFAULT_FILE_BUDGET_BYTES),
        }
    }
}

impl OpenOptions {
    /// The options a program opens `spec` with: `kube` from its flags and,
    /// for a `file:` ledger, the budget [`FILE_BUDGET_ENV`] sets (read for a
    /// file ledger only: it is that ledger's setting). A budget that is
    /// neither a byte count nor `none` is an error, never the default.
    pub fn for_spec(spec: &LedgerSpec, kube: KubeOptions) -> Result<Self, String> {
        let file_budget = match spec {
            LedgerSpec::File(_) => file_budget_from_env()?,
            _ => OpenOptions::default().file_budget,
        };
        Ok(OpenOptions { kube, file_budget })
    }
}

impl LedgerSpec {
    async fn client(&self, options: &KubeOptions) -> Result<kube::Client, String> {
        let fail =
            |e: &dyn fmt::Display| format!("cannot reach a Kubernetes API server for {self}: {e}");
        if *options == KubeOptions::default() {
            return migration_kube::client::infer().await.map_err(|e| fail(&e));
        }
        let chosen = kube::config::KubeConfigOptions {
            context: options.context.clone(),
            ..Default::default()
        };
        let config = match &options.kubeconfig {
            Some(path) => {
                let file = kube::config::Kubeconfig::read_from(path)
                    .map_err(|e| format!("--kubeconfig {}: {e}", path.display()))?;
                kube::Config::from_custom_kubeconfig(file, &chosen).await
            }
            None => kube::Config::from_kubeconfig(&chosen).await,
        }
        .map_err(|e| match &options.context {
            Some(context) => format!("--context {context}: {e}"),
            None => fail(&e),
        })?;
        migration_kube::client::from_config(config).map_err(|e| fail(&e))
    }

    /// Refuses a spec that cannot name a ledger, before anything opens it:
    /// a `file:` path that is (or leads to) a device, a FIFO, a directory
    /// or a socket, named with what it is.
    pub fn check(&self) -> Result<(), String> {
        match self {
            LedgerSpec::File(path) => FileLedger::new(path)
                .refuse_special_file()
                .map_err(|e| format!("--ledger {self}: {e}")),
            LedgerSpec::Memory | LedgerSpec::ConfigMap { .. } | LedgerSpec::Crd { .. } => Ok(()),
        }
    }

    /// Opens the ledger the spec names, with `options`. Kubernetes backends
    /// without a chosen kubeconfig or context discover their cluster the
    /// usual way (`KUBECONFIG`, `~/.kube/config`, in-cluster).
    pub async fn open(&self, options: &OpenOptions) -> Result<Arc<dyn LockedLedger>, String> {
        Ok(match self {
            LedgerSpec::File(path) => {
                Arc::new(FileLedger::new(path).with_budget(options.file_budget))
            }
            LedgerSpec::Memory => Arc::new(MemoryLedger::new()),
            LedgerSpec::ConfigMap { namespace, name } => {
                let client = self.client(&options.kube).await?;
                Arc::new(ledger_configmap::ConfigMapLedger::new(
                    client, namespace, name,
                ))
            }
            LedgerSpec::Crd { name } => Arc::new(ledger_crd::CrdLedger::new(
                self.client(&options.kube).await?,
                name,
            )),
        })
    }
}

/// The environment variable that sets the file ledger's size budget in
/// bytes (`none`: unlimited). Unset, the budget is
/// [`ledger_file::DEFAULT_FILE_BUDGET_BYTES`].
pub const FILE_BUDGET_ENV: &str = "MIGRATE_FILE_LEDGER_BUDGET";

/// The file ledger's budget from [`FILE_BUDGET_ENV`]; a value that is neither
/// a byte count nor `none` is an error, never the default.
fn file_budget_from_env() -> Result<Option<u64>, String> {
    match std::env::var(FILE_BUDGET_ENV) {
        Err(std::env::VarError::NotPresent) => Ok(Some(ledger_file::DEFAULT_FILE_BUDGET_BYTES)),
        Err(e) => Err(format!("{FILE_BUDGET_ENV}: {e}")),
        Ok(v) if v.trim() == "none" => Ok(None),
        Ok(v) => v
            .trim()
            .parse::<u64>()
            .map(Some)
            .map_err(|_| format!("{FILE_BUDGET_ENV}={v:?} is neither a byte count nor 'none'")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_file_and_memory() {
        assert_eq!(
            "file:/var/lib/ledger.json".parse(),
            Ok(LedgerSpec::File("/var/lib/ledger.json".into()))
        );
        assert_eq!(
            "file:rel/x.json".parse(),
            Ok(LedgerSpec::File("rel/x.json".into()))
        );
        assert_eq!("memory:".parse(), Ok(LedgerSpec::Memory));
        assert_eq!(
            "configmap:cozy-system/cozystack-version".parse(),
            Ok(LedgerSpec::ConfigMap {
                namespace: "cozy-system".into(),
                name: "cozystack-version".into()
            })
        );
    }

    #[test]
    fn rejects_what_it_does_not_know_with_a_reason() {
        for (input, reason) in [
            ("", "no ':'"),
            ("file", "no ':'"),
            ("file:", "needs a path"),
            ("memory:x", "takes nothing"),
            ("s3:bucket", "unknown backend"),
            ("file:a\0b", "NUL"),
            ("configmap:cozy-system", "NAMESPACE/NAME"),
            ("configmap:Cozy/x", "DNS label"),
            ("configmap:ns/bad_name", "DNS subdomain"),
            ("configmap:ns/", "DNS subdomain"),
            ("crd:", "MigrationLedger name"),
            ("crd:Bad", "MigrationLedger name"),
        ] {
            let err = input.parse::<LedgerSpec>().unwrap_err();
            assert!(err.reason.contains(reason), "{input:?}: {err}");
        }
    }

    #[test]
    fn display_round_trips() {
        for s in [
            "file:/x/y.json",
            "memory:",
            "configmap:a/b.c",
            "crd:platform",
        ] {
            assert_eq!(s.parse::<LedgerSpec>().unwrap().to_string(), s);
        }
    }
}
