//! `distlock man [COMMAND]`: the manual page of `distlock`, or of one of its commands
//! (`distlock-run(1)`, which `distlock(1)` lists), as roff on stdout.
//!
//! clap_mangen renders the sections from the clap definitions; the EXIT STATUS section (and
//! `run`'s ENVIRONMENT) are written here from the same texts as `--help` shows.

use std::io::Write;

use clap::Command;

/// Exit status of every command but `run`, which passes its command's code through.
const EXIT_STATUS: &str = "\
0  success (unlock: unlocked, or nothing of that name is held)
1  an error: the server unreachable, a wrong password, bad input, a key of another type
2  a usage error
run: the code of CMD, or 75 (not acquired within --wait, or a job lock held elsewhere),
125 (distlock itself failed; CMD did not run), 126 (CMD cannot be executed), 127 (CMD not
found), 128+N (CMD died of signal N); see distlock-run(1).";

/// Display order of the first connection option on a command's page: after the command's
/// own options.
const CONNECTION_ORDER: usize = 1000;

/// The page of `root` (the `distlock` command) when `command` is `None`, else of its
/// subcommand `command`. Errors name the commands there are.
pub fn render(root: Command, command: Option<&str>) -> anyhow::Result<Vec<u8>> {
    // No `help` command on the page: it has no page of its own (`--help` is in each).
    let root = root.disable_help_subcommand(true);
    let mut out = Vec::new();
    let Some(name) = command else {
        let man = clap_mangen::Man::new(root.clone());
        man.render_title(&mut out)?;
        man.render_name_section(&mut out)?;
        man.render_synopsis_section(&mut out)?;
        man.render_description_section(&mut out)?;
        man.render_options_section(&mut out)?;
        man.render_subcommands_section(&mut out)?;
        section(
            &mut out,
            "SEE ALSO",
            "Each command's page: distlock man COMMAND > distlock-COMMAND.1 (for example \
             distlock man run).",
        )?;
        section(&mut out, "EXIT STATUS", EXIT_STATUS)?;
        man.render_version_section(&mut out)?;
        return Ok(out);
    };
    let sub = root
        .get_subcommands()
        .find(|s| s.get_name() == name && !s.is_hide_set())
        .ok_or_else(|| {
            let names: Vec<&str> = root
                .get_subcommands()
                .filter(|s| !s.is_hide_set())
                .map(Command::get_name)
                .collect();
            anyhow::anyhow!("no command {name:?}: one of {}", names.join(", "))
        })?;
    // Its own options, then the connection options every command takes.
    // clap names are `&'static str` (no `string` feature): one page per process.
    let page_name: &'static str = Box::leak(format!("distlock-{name}").into_boxed_str());
    let mut page = sub.clone().name(page_name);
    // Listed after the command's own (its SYNOPSIS and OPTIONS sort by display order, and
    // both sets count from 0).
    for (i, arg) in root
        .get_arguments()
        .filter(|a| a.is_global_set())
        .enumerate()
    {
        page = page.arg(arg.clone().display_order(CONNECTION_ORDER + i));
    }
    let after = page.get_after_help().map(|h| h.to_string());
    let man = clap_mangen::Man::new(page.after_help(None::<&str>));
    man.render_title(&mut out)?;
    man.render_name_section(&mut out)?;
    man.render_synopsis_section(&mut out)?;
    man.render_description_section(&mut out)?;
    man.render_options_section(&mut out)?;
    let (environment, exit) = match after.as_deref().and_then(|h| h.split_once("Exit status:")) {
        Some((env, exit)) => (Some(env.trim()), exit.trim().to_string()),
        None => (after.as_deref().map(str::trim), OWN_EXIT_STATUS.to_string()),
    };
    if let Some(env) = environment.filter(|e| !e.is_empty()) {
        section(&mut out, "ENVIRONMENT", env)?;
    }
    section(&mut out, "EXIT STATUS", &exit)?;
    section(&mut out, "SEE ALSO", "distlock(1)")?;
    Ok(out)
}

/// The exit status of a command other than `run`.
const OWN_EXIT_STATUS: &str = "\
0  success
1  an error: the server unreachable, a wrong password, bad input, a key of another type
2  a usage error";

/// A section `.SH TITLE` with `text` kept line by line (`.nf`), roff-escaped.
fn section(out: &mut Vec<u8>, title: &str, text: &str) -> std::io::Result<()> {
    writeln!(out, ".SH \"{title}\"")?;
    writeln!(out, ".nf")?;
    for line in text.lines() {
        let line = line.replace('\\', "\\e");
        // A line starting with `.` or `'` would be a roff request.
        if line.starts_with('.') || line.starts_with('\'') {
            writeln!(out, "\\&{line}")?;
        } else {
            writeln!(out, "{line}")?;
        }
    }
    writeln!(out, ".fi")
}

#[cfg(test)]
mod tests {
    use super::section;

    #[test]
    fn sections_escape_roff() {
        let mut out = Vec::new();
        section(&mut out, "EXIT STATUS", ".x\n'y\na\\b").unwrap();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            ".SH \"EXIT STATUS\"\n.nf\n\\&.x\n\\&'y\na\\eb\n.fi\n"
        );
    }
}
