//! The tunables every Kubernetes ledger takes, declared once for both
//! backends' `Options`.

/// Declares a Kubernetes backend's `Options`: the backend's own fields
/// (listed last, each with its default) first, then the tunables every
/// Kubernetes ledger takes: the size budget (`budget` is the backend's own
/// default), the retry policy and the clock. `Default` gives the production values
/// and `Debug` shows every field but the clock.
///
/// ```
/// const BUDGET_BYTES: u64 = 1024;
/// migration_kube::ledger_options! {
///     budget: BUDGET_BYTES,
///     budget_doc: "Size budget in bytes (default [`BUDGET_BYTES`]).",
///     clock_doc: "Clock for lock expiry.",
///     /// Name of the run-lock Lease.
///     lock_name: String = "ledger-lock".to_owned(),
/// }
/// let options = Options::default();
/// assert_eq!((options.budget, options.lock_name.as_str()), (1024, "ledger-lock"));
/// assert_eq!(options.retry, migration_kube::RetryPolicy::default());
/// ```
#[macro_export]
macro_rules! ledger_options {
    (
        budget: $budget:expr,
        budget_doc: $budget_doc:literal,
        clock_doc: $clock_doc:literal,
        $(
            $(#[$meta:meta])*
            $field:ident: $type:ty = $default:expr,
        )*
    ) => {
        /// Tunables; the defaults suit production.
        #[derive(Clone)]
        pub struct Options {
            $(
                $(#[$meta])*
                pub $field: $type,
            )*
            #[doc = $budget_doc]
            pub budget: u64,
            /// Retry policy for transient errors and precondition conflicts.
            pub retry: $crate::RetryPolicy,
            #[doc = $clock_doc]
            pub clock: ::std::sync::Arc<dyn ::migration_core::Clock>,
        }

        impl ::std::default::Default for Options {
            fn default() -> Self {
                Options {
                    $($field: $default,)*
                    budget: $budget,
                    retry: $crate::RetryPolicy::default(),
                    clock: ::std::sync::Arc::new(::migration_core::SystemClock),
                }
            }
        }

        impl ::std::fmt::Debug for Options {
            fn fmt(&self, f: &mut ::std::fmt::Formatter<'_>) -> ::std::fmt::Result {
                f.debug_struct("Options")
                    $(.field(stringify!($field), &self.$field))*
                    .field("budget", &self.budget)
                    .field("retry", &self.retry)
                    .finish_non_exhaustive()
            }
        }
    };
}
