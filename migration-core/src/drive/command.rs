//! How a migration script is started, in one place: the interpreter
//! command line and the `MIGRATION_*` environment (CONTRACT.md §6). The
//! run's executor, `migrate test` and convert's behaviour check all start
//! scripts through [`ScriptCommand`], so a script runs under a test or a
//! check exactly as it runs in production.

use std::path::Path;
use std::process::Command;

/// One script start: what [`ScriptCommand::build`] needs.
#[derive(Debug, Clone, Copy)]
pub struct ScriptCommand<'c> {
    /// The script's shebang line without `#!`: its interpreter.
    pub shebang: &'c str,
    /// The file the interpreter sources: the bytes that run.
    pub copy: &'c Path,
    /// The script's path in the tree: its `$0`.
    pub path: &'c Path,
    /// The tree's root: the working directory and `MIGRATION_TREE`.
    pub tree: &'c Path,
    /// `MIGRATION_SLUG`.
    pub slug: &'c str,
    /// `MIGRATION_TIER`.
    pub tier: &'c str,
    /// `MIGRATION_NAMESPACE`.
    pub namespace: &'c str,
    /// `MIGRATION_BATCH`.
    pub batch: &'c str,
    /// `MIGRATION_ATTEMPT`: the execution count, this one included.
    pub attempt: u32,
}

impl ScriptCommand<'_> {
    /// The command: the shebang's words, then errexit (and pipefail for
    /// bash, which supports it), then `-c '. COPY' PATH`, which runs `copy`
    /// with `$0` set to `path`. The file at `path` is never read again: an
    /// edit after the scan would otherwise run unscanned (and a shell reads
    /// its script as it goes, so even an edit while it runs would). `. COPY`
    /// keeps `$0` what a script run by path has, so
    /// `"$(dirname "$0")/../lib/x.sh"` still finds the tree's helpers. The
    /// working directory is the tree, and the environment carries the
    /// `MIGRATION_*` variables, without `MIGRATION_DRY_RUN`: a script's own
    /// dry-run switch must not be inherited by a real run (it would exit 0
    /// having done nothing, and be recorded `ok`).
    pub fn build(&self) -> Command {
        use std::os::unix::ffi::{OsStrExt, OsStringExt};
        let mut words = self.shebang.split_whitespace();
        let program = words.next().unwrap_or("/bin/sh");
        let args: Vec<&str> = words.collect();
        let mut cmd = Command::new(program);
        cmd.args(&args);
        let is_bash = program.ends_with("/bash") || args.first().is_some_and(|a| *a == "bash");
        cmd.arg("-e");
        if is_bash {
            cmd.args(["-o", "pipefail"]);
        }
        // Quoted byte for byte (a path need not be UTF-8).
        let mut source = b". ".to_vec();
        source.extend(crate::shell::quoted_bytes(self.copy.as_os_str().as_bytes()));
        cmd.arg("-c")
            .arg(std::ffi::OsString::from_vec(source))
            .arg(self.path)
            .current_dir(self.tree)
            .env("MIGRATION_SLUG", self.slug)
            .env("MIGRATION_TIER", self.tier)
            .env("MIGRATION_TREE", self.tree)
            .env("MIGRATION_NAMESPACE", self.namespace)
            .env("MIGRATION_BATCH", self.batch)
            .env("MIGRATION_ATTEMPT", self.attempt.to_string())
            .env_remove("MIGRATION_DRY_RUN");
        cmd
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn script(shebang: &'static str, copy: &'static str) -> ScriptCommand<'static> {
        ScriptCommand {
            shebang,
            copy: Path::new(copy),
            path: Path::new("/t/pre-apply/s"),
            tree: Path::new("/t"),
            slug: "s",
            tier: "pre-apply",
            namespace: "ns",
            batch: "b",
            attempt: 2,
        }
    }

    fn args(cmd: &Command) -> Vec<String> {
        cmd.get_args()
            .map(|a| a.to_string_lossy().into_owned())
            .collect()
    }

    #[test]
    fn the_copy_is_sourced_with_dollar_zero_naming_the_script_in_the_tree() {
        let cmd = script("/bin/sh", "/tmp/it's/s").build();
        assert_eq!(
            args(&cmd),
            ["-e", "-c", ". '/tmp/it'\\''s/s'", "/t/pre-apply/s"]
        );
    }

    #[test]
    fn bash_gets_pipefail_and_sh_does_not() {
        assert_eq!(args(&script("/bin/sh", "c").build())[..2], ["-e", "-c"]);
        let bash = script("/usr/bin/env bash", "c").build();
        assert_eq!(args(&bash)[..4], ["bash", "-e", "-o", "pipefail"]);
    }

    #[test]
    fn the_script_gets_every_migration_variable_and_never_a_dry_run_switch() {
        let cmd = script("/bin/sh", "c").build();
        let env: Vec<(String, Option<String>)> = cmd
            .get_envs()
            .map(|(k, v)| {
                (
                    k.to_string_lossy().into_owned(),
                    v.map(|v| v.to_string_lossy().into_owned()),
                )
            })
            .collect();
        for (k, v) in [
            ("MIGRATION_SLUG", "s"),
            ("MIGRATION_TIER", "pre-apply"),
            ("MIGRATION_TREE", "/t"),
            ("MIGRATION_NAMESPACE", "ns"),
            ("MIGRATION_BATCH", "b"),
            ("MIGRATION_ATTEMPT", "2"),
        ] {
            assert!(env.contains(&(k.into(), Some(v.into()))), "{k}: {env:?}");
        }
        assert!(env.contains(&("MIGRATION_DRY_RUN".into(), None)), "{env:?}");
        assert_eq!(cmd.get_current_dir(), Some(Path::new("/t")));
    }
}
