//! A small command-line parser: `--name value`, `--name=value`, boolean `--flag`, and
//! positional arguments; `--` ends options.

use std::collections::BTreeMap;

/// Parsed arguments of one subcommand.
#[derive(Debug, Default)]
pub struct Args {
    values: BTreeMap<String, String>,
    flags: Vec<String>,
    /// Positional arguments in order.
    pub positional: Vec<String>,
    /// Everything after `--`.
    pub rest: Vec<String>,
}

impl Args {
    /// Parse `argv` given which options take a value and which are flags; unknown
    /// options are an error naming the option.
    pub fn parse(argv: &[String], valued: &[&str], flags: &[&str]) -> Result<Args, String> {
        let mut a = Args::default();
        let mut i = 0;
        while i < argv.len() {
            let s = &argv[i];
            if s == "--" {
                a.rest = argv[i + 1..].to_vec();
                break;
            }
            if let Some(opt) = s.strip_prefix("--") {
                let (name, inline) = match opt.split_once('=') {
                    Some((n, v)) => (n, Some(v.to_string())),
                    None => (opt, None),
                };
                if valued.contains(&name) {
                    let v = match inline {
                        Some(v) => v,
                        None => {
                            i += 1;
                            argv.get(i)
                                .cloned()
                                .ok_or_else(|| format!("option --{name} needs a value"))?
                        }
                    };
                    a.values.insert(name.to_string(), v);
                } else if flags.contains(&name) {
                    if inline.is_some() {
                        return Err(format!("option --{name} takes no value"));
                    }
                    a.flags.push(name.to_string());
                } else {
                    return Err(format!("unknown option --{name}"));
                }
            } else {
                a.positional.push(s.clone());
            }
            i += 1;
        }
        Ok(a)
    }

    /// The value of `--name`.
    pub fn value(&self, name: &str) -> Option<&str> {
        self.values.get(name).map(String::as_str)
    }

    /// Whether `--name` was given.
    pub fn flag(&self, name: &str) -> bool {
        self.flags.iter().any(|f| f == name)
    }
}
