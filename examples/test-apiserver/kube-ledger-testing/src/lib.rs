//! # kube-ledger-testing
//!
//! Test support for the Kubernetes ledger backends, kept out of their
//! plumbing (`migration-kube` depends on no test tool):
//!
//! - [`fault_suite`]: the API-fault cases both backends run against the
//!   in-process [`test_apiserver`], parametrised by resource
//!   ([`ledger_fault_tests!`]);
//! - [`real_lane`]: the conformance lane against a real API server
//!   ([`real_cluster_lane_test!`]);
//! - [`output_tails`]: where both keep a failure's output (issue 35), against a real API
//!   server.

#![allow(clippy::unwrap_used, clippy::expect_used)]

pub mod fault_suite;
pub mod output_tails;
pub mod real_lane;
