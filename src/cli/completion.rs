//! `gitfleet completion`: shell completion scripts, from clap's own generator, with the names
//! of the repository's placements and clusters completed after `--placement` and `--cluster`
//! (bash, zsh, fish) through the hidden `gitfleet __complete placements|clusters`, which the
//! scripts call with the `--repo` of the command line being completed.

use super::inputs::CommitArgs;
use super::*;
use anyhow::Result;
use clap::{Args, ValueEnum};
use std::process::ExitCode;

#[derive(Debug, Args)]
pub struct CompletionArgs {
    #[arg(value_enum)]
    pub shell: CompletionShell,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum CompletionShell {
    Bash,
    Zsh,
    Fish,
    #[value(name = "powershell")]
    PowerShell,
}

/// The completion scripts' helper, `gitfleet __complete placements|clusters [--repo DIR]`.
pub const NAMES_COMMAND: &str = "__complete";

/// `gitfleet __complete`: what the completion scripts ask for. Not in `--help` nor offered by
/// the completions: its output is for the scripts.
#[derive(Debug, clap::Parser)]
#[command(name = "gitfleet __complete")]
pub struct NamesArgs {
    #[arg(value_enum)]
    pub what: Names,
    #[command(flatten)]
    pub commit: CommitArgs,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum Names {
    /// Placement ids: `crp/NAME`, `rp/NAMESPACE/NAME`, `ocm/NAMESPACE/NAME`.
    Placements,
    /// Member clusters: MemberClusters and ManagedClusters.
    Clusters,
}

pub(super) fn completion(args: &CompletionArgs) -> Result<ExitCode> {
    use std::io::Write;
    let script = script(args.shell);
    std::io::stdout().lock().write_all(script.as_bytes())?;
    Ok(ExitCode::SUCCESS)
}

/// The completion script for `shell`.
pub fn script(shell: CompletionShell) -> String {
    use clap::CommandFactory;
    use clap_complete::Shell;
    let generator = match shell {
        CompletionShell::Bash => Shell::Bash,
        CompletionShell::Zsh => Shell::Zsh,
        CompletionShell::Fish => Shell::Fish,
        CompletionShell::PowerShell => Shell::PowerShell,
    };
    let mut out = Vec::new();
    clap_complete::generate(generator, &mut Cli::command(), "gitfleet", &mut out);
    let script = String::from_utf8(out).expect("clap writes UTF-8");
    match shell {
        CompletionShell::Bash => with_names_bash(&script),
        CompletionShell::Zsh => with_names_zsh(&script),
        CompletionShell::Fish => format!("{script}{FISH_NAMES}"),
        CompletionShell::PowerShell => script,
    }
}

const BASH_NAMES: &str = r#"
# Placement and cluster names of the repository being completed (its --repo, else .).
_gitfleet_names() {
    local repo=. i
    for ((i = 1; i < ${#COMP_WORDS[@]} - 1; i++)); do
        case "${COMP_WORDS[i]}" in
            --repo) repo="${COMP_WORDS[i+1]}" ;;
            --repo=*) repo="${COMP_WORDS[i]#--repo=}" ;;
        esac
    done
    command gitfleet __complete "$1" --repo "$repo" 2>/dev/null
}
"#;

/// clap completes `--placement` and `--cluster` values as file names: names of the repository
/// instead.
fn with_names_bash(script: &str) -> String {
    let mut out = String::from(BASH_NAMES);
    let mut lines = script.lines().peekable();
    while let Some(line) = lines.next() {
        out.push_str(line);
        out.push('\n');
        let what = match line.trim() {
            "--placement)" => "placements",
            "--cluster)" => "clusters",
            _ => continue,
        };
        if lines
            .peek()
            .is_some_and(|next| next.trim() == r#"COMPREPLY=($(compgen -f "${cur}"))"#)
        {
            let next = lines.next().unwrap_or_default();
            let indent = &next[..next.len() - next.trim_start().len()];
            out.push_str(&format!(
                "{indent}COMPREPLY=($(compgen -W \"$(_gitfleet_names {what})\" -- \"${{cur}}\"))\n"
            ));
        }
    }
    out
}

const ZSH_NAMES: &str = r#"
# Placement and cluster names of the repository being completed (its --repo, else .).
_gitfleet_names() {
    local repo=. i
    for ((i = 2; i < CURRENT; i++)); do
        case $words[i] in
            --repo) repo=$words[i+1] ;;
            --repo=*) repo=${words[i]#--repo=} ;;
        esac
    done
    local -a names
    names=(${(f)"$(command gitfleet __complete $1 --repo $repo 2>/dev/null)"})
    compadd -a names
}
_gitfleet_placements() { _gitfleet_names placements }
_gitfleet_clusters() { _gitfleet_names clusters }
"#;

fn with_names_zsh(script: &str) -> String {
    let script = script
        .replace(":PLACEMENT:_default'", ":PLACEMENT:_gitfleet_placements'")
        .replace(":CLUSTER:_default'", ":CLUSTER:_gitfleet_clusters'");
    // After `#compdef gitfleet`, which must stay the first line.
    match script.split_once('\n') {
        Some((first, rest)) => format!("{first}\n{ZSH_NAMES}{rest}"),
        None => script,
    }
}

const FISH_NAMES: &str = r#"
# Placement and cluster names of the repository being completed (its --repo, else .).
function __gitfleet_names
    set -l repo .
    set -l tokens (commandline -opc)
    for i in (seq (count $tokens))
        if test "$tokens[$i]" = --repo
            set repo $tokens[(math $i + 1)]
        end
    end
    command gitfleet __complete $argv[1] --repo $repo 2>/dev/null
end
complete -c gitfleet -n "__fish_seen_subcommand_from render apply" -l placement -f -a "(__gitfleet_names placements)"
complete -c gitfleet -n "__fish_seen_subcommand_from render plan" -l cluster -f -a "(__gitfleet_names clusters)"
"#;

/// `gitfleet __complete …`: prints the names the scripts complete, one a line; nothing (and
/// exit 0) when the repository cannot be read, so a completion never prints an error into the
/// command line being completed.
pub(super) fn names_main() -> ExitCode {
    use clap::Parser;
    let args = std::env::args_os().skip(1);
    match NamesArgs::try_parse_from(args) {
        Ok(args) => names(&args),
        Err(e) => usage_exit(&e),
    }
}

fn names(args: &NamesArgs) -> ExitCode {
    let Ok(commit) =
        crate::source::read_commit(&args.commit.repo, &args.commit.rev, &args.commit.path)
    else {
        return ExitCode::SUCCESS;
    };
    let (cat, _) = commit.analyze();
    let names: Vec<String> = match args.what {
        Names::Placements => cat
            .placements
            .iter()
            .map(|e| cat.placement_key(e).to_string())
            .chain(cat.ocm_placements.iter().map(|e| {
                crate::model::PlacementKey::new(
                    crate::model::PlacementKind::OcmPlacement,
                    cat.objects[e.index].namespace.as_deref(),
                    &cat.objects[e.index].name,
                )
                .to_string()
            }))
            .collect(),
        Names::Clusters => crate::schedule::Fleet::build(&cat, None)
            .clusters
            .iter()
            .map(|c| c.name.to_string())
            .collect(),
    };
    for n in names {
        println!("{n}");
    }
    ExitCode::SUCCESS
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_shell_gets_a_script_and_three_complete_the_repositorys_names() {
        let bash = script(CompletionShell::Bash);
        assert!(bash.contains("_gitfleet_names() {"), "{bash}");
        assert!(
            bash.contains(
                r#"COMPREPLY=($(compgen -W "$(_gitfleet_names placements)" -- "${cur}"))"#
            ) && bash
                .contains(r#"COMPREPLY=($(compgen -W "$(_gitfleet_names clusters)" -- "${cur}"))"#),
            "clap's bash script changed its shape: --placement is completed as files again"
        );
        let zsh = script(CompletionShell::Zsh);
        assert!(zsh.starts_with("#compdef gitfleet\n"), "{zsh}");
        assert!(
            zsh.contains(":PLACEMENT:_gitfleet_placements'")
                && zsh.contains(":CLUSTER:_gitfleet_clusters'")
                && !zsh.contains(":PLACEMENT:_default'"),
            "clap's zsh script changed its shape"
        );
        let fish = script(CompletionShell::Fish);
        assert!(
            fish.contains("-l placement -f -a \"(__gitfleet_names placements)\""),
            "{fish}"
        );
        let ps = script(CompletionShell::PowerShell);
        assert!(
            ps.contains("Register-ArgumentCompleter -Native -CommandName 'gitfleet'"),
            "{ps}"
        );
        // The hidden helper is never offered as a command.
        for s in [&bash, &zsh, &fish, &ps] {
            assert!(!s.contains("__complete'") && !s.contains("\"__complete\""));
        }
    }
}
