//! Which of the host's environment variables a kernel may see (docs/security.md).
//!
//! Per variable, in this order: the denylist drops; the allowlist keeps; the secret pattern
//! drops; the allow-prefixes keep; everything else drops. Dropping by default means a new
//! credential variable never leaks just because nobody listed it.

use std::collections::{BTreeMap, HashMap};

pub const DEFAULT_ENV_PREFIX: &str = "PYKERNEL_";

/// Why `prefix` cannot be an `envPrefix`, if it cannot. It begins variable names
/// (`<PREFIX>API_KEY`, `<PREFIX>PYTHON_SKIP_CHECK`), so it must be one itself: letters,
/// digits and `_`, not starting with a digit; empty means no brand prefix at all.
pub fn env_prefix_fault(prefix: &str) -> Option<String> {
    const MAX_LEN: usize = 64;
    let valid_chars = prefix
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b == b'_');
    if prefix.len() > MAX_LEN {
        Some(format!(
            "must be at most {MAX_LEN} characters, got {}",
            prefix.len()
        ))
    } else if !valid_chars || prefix.starts_with(|c: char| c.is_ascii_digit()) {
        Some(format!(
            "must be a variable-name prefix (letters, digits and '_', not starting with a digit, such as 'ACME_'), got {prefix:?}"
        ))
    } else {
        None
    }
}

/// Variables a Python process (and the tools it runs) legitimately needs.
const ALLOWLIST: &[&str] = &[
    "PATH",
    "HOME",
    "USER",
    "USERNAME",
    "LOGNAME",
    "SHELL",
    "LANG",
    "LC_ALL",
    "LC_CTYPE",
    "LC_MESSAGES",
    "TERM",
    "TERM_PROGRAM",
    "TERM_PROGRAM_VERSION",
    "TMPDIR",
    "TEMP",
    "TMP",
    "XDG_CACHE_HOME",
    "XDG_CONFIG_HOME",
    "XDG_DATA_HOME",
    "XDG_RUNTIME_DIR",
    // Not SSH_AUTH_SOCK (nor SSH_AGENT_PID): the agent socket signs with the user's keys.
    // A host that wants a kernel to use it passes it in `env`.
    "SSH_CONNECTION",
    "SSH_CLIENT",
    "SSH_TTY",
    "DISPLAY",
    "XAUTHORITY",
    "TZ",
    "SYSTEMROOT",
    "WINDIR",
    "COMSPEC",
    "PATHEXT",
    "LD_LIBRARY_PATH",
    "DYLD_LIBRARY_PATH",
    // Python environments.
    "CONDA_PREFIX",
    "CONDA_DEFAULT_ENV",
    "VIRTUAL_ENV",
    "PYTHONPATH",
    // Networks behind a proxy or a private CA, and private package indexes: without them
    // pip, requests and curl fail in the kernel where they work in the host.
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "NO_PROXY",
    "ALL_PROXY",
    "http_proxy",
    "https_proxy",
    "no_proxy",
    "all_proxy",
    "SSL_CERT_FILE",
    "SSL_CERT_DIR",
    "REQUESTS_CA_BUNDLE",
    "CURL_CA_BUNDLE",
    "PIP_INDEX_URL",
    "PIP_EXTRA_INDEX_URL",
    "PIP_TRUSTED_HOST",
    "PIP_CERT",
    // Which GPUs a kernel may use.
    "CUDA_VISIBLE_DEVICES",
    // Names that look like secrets to the pattern below but are settings.
    "TOKENIZERS_PARALLELISM",
    // The usual Windows set.
    "APPDATA",
    "LOCALAPPDATA",
    "USERPROFILE",
    "PROGRAMFILES",
    "PROGRAMFILES(X86)",
    "PROGRAMW6432",
    "PROGRAMDATA",
    "COMMONPROGRAMFILES",
    "COMMONPROGRAMFILES(X86)",
    "ALLUSERSPROFILE",
    "PUBLIC",
    "HOMEDRIVE",
    "HOMEPATH",
    "SYSTEMDRIVE",
    "OS",
    "NUMBER_OF_PROCESSORS",
    "PROCESSOR_ARCHITECTURE",
    "COMPUTERNAME",
];

/// Well-known credentials, dropped even where a prefix would keep them.
const DENYLIST: &[&str] = &[
    "OPENAI_API_KEY",
    "ANTHROPIC_API_KEY",
    "GOOGLE_API_KEY",
    "GEMINI_API_KEY",
    "OPENROUTER_API_KEY",
    "PERPLEXITY_API_KEY",
    "PERPLEXITY_COOKIES",
    "EXA_API_KEY",
    "AZURE_OPENAI_API_KEY",
    "MISTRAL_API_KEY",
];

/// Brand-prefixed names that carry the host's own secrets.
const DENIED_PREFIXED_SUFFIXES: &[&str] = &["API_KEY", "TOKEN", "PASSWORD", "SESSION"];

/// The case-insensitive, unanchored pattern
/// `API[_-]?KEY|APIKEY|SECRET|TOKEN|PASSWORD|PASSWD|CREDENTIAL|ACCESS[_-]?KEY|PRIVATE[_-]?KEY`,
/// spelled out as the substrings it matches.
const SECRET_SUBSTRINGS: &[&str] = &[
    "API_KEY",
    "API-KEY",
    "APIKEY",
    "SECRET",
    "TOKEN",
    "PASSWORD",
    "PASSWD",
    "CREDENTIAL",
    "ACCESS_KEY",
    "ACCESS-KEY",
    "ACCESSKEY",
    "PRIVATE_KEY",
    "PRIVATE-KEY",
    "PRIVATEKEY",
];

const ALLOWED_PREFIXES: &[&str] = &["LC_", "XDG_"];

/// Why a variable was kept or dropped; the order of the variants is the order of the checks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    Denied,
    Allowed,
    Secret,
    AllowedPrefix,
    NotListed,
}

impl Verdict {
    pub fn keeps(self) -> bool {
        matches!(self, Verdict::Allowed | Verdict::AllowedPrefix)
    }
}

pub struct EnvFilter {
    prefix: String,
    /// Windows variable names are case-insensitive, so compare them upper-cased there.
    case_insensitive: bool,
}

impl EnvFilter {
    pub fn new(env_prefix: &str) -> Self {
        Self {
            prefix: env_prefix.to_string(),
            case_insensitive: cfg!(windows),
        }
    }

    pub fn verdict(&self, name: &str) -> Verdict {
        let folded;
        let (name, prefix) = if self.case_insensitive {
            folded = (name.to_ascii_uppercase(), self.prefix.to_ascii_uppercase());
            (folded.0.as_str(), folded.1.as_str())
        } else {
            (name, self.prefix.as_str())
        };
        let brand_secret = !prefix.is_empty()
            && name
                .strip_prefix(prefix)
                .is_some_and(|rest| DENIED_PREFIXED_SUFFIXES.contains(&rest));
        if brand_secret || DENYLIST.contains(&name) {
            return Verdict::Denied;
        }
        if ALLOWLIST.contains(&name) {
            return Verdict::Allowed;
        }
        let upper = name.to_ascii_uppercase();
        if SECRET_SUBSTRINGS.iter().any(|s| upper.contains(s)) {
            return Verdict::Secret;
        }
        let prefixed = ALLOWED_PREFIXES.iter().any(|p| name.starts_with(p))
            || (!prefix.is_empty() && name.starts_with(prefix));
        if prefixed {
            Verdict::AllowedPrefix
        } else {
            Verdict::NotListed
        }
    }

    pub fn filter<'a, I>(&self, vars: I) -> BTreeMap<String, String>
    where
        I: IntoIterator<Item = (&'a String, &'a String)>,
    {
        vars.into_iter()
            .filter(|(name, _)| self.verdict(name).keeps())
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect()
    }
}

/// Filters `env` for a kernel. The map form is what the napi layer hands over.
pub fn filter_env(env: &HashMap<String, String>, env_prefix: &str) -> BTreeMap<String, String> {
    EnvFilter::new(env_prefix).filter(env)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_env_prefix_must_begin_variable_names() {
        for good in ["PYKERNEL_", "ACME_", "acme", "_X1", ""] {
            assert_eq!(env_prefix_fault(good), None, "{good:?}");
        }
        for bad in ["a b", "ACME-", "1X_", "X=", "É_"] {
            let fault = env_prefix_fault(bad).unwrap_or_else(|| panic!("{bad:?} accepted"));
            assert!(fault.contains("letters, digits and '_'"), "{fault}");
        }
        assert!(env_prefix_fault(&"A".repeat(65)).is_some());
    }

    fn keeps(name: &str) -> bool {
        EnvFilter::new(DEFAULT_ENV_PREFIX).verdict(name).keeps()
    }

    #[test]
    fn keeps_the_allowlist_and_prefixes() {
        for name in [
            "PATH",
            "HOME",
            "LD_LIBRARY_PATH",
            "LC_FOO",
            "XDG_STATE_HOME",
            "PYKERNEL_FOO",
            "VIRTUAL_ENV",
        ] {
            assert!(keeps(name), "{name} should be kept");
        }
    }

    #[test]
    fn drops_secrets_and_unlisted_names() {
        for name in [
            "OPENAI_API_KEY",
            "ANTHROPIC_API_KEY",
            "MY_SECRET",
            "GITHUB_TOKEN",
            "UNSAFE_TOKEN",
            "aws_access_key_id",
            "DB_PASSWD",
            "PYKERNEL_API_KEY",
            "PYKERNEL_TOKEN",
            "PYKERNEL_SESSION",
            "PYKERNEL_SECRET_SAUCE",
            "LC_PRIVATE_KEY",
            "RANDOM_THING",
        ] {
            assert!(!keeps(name), "{name} should be dropped");
        }
    }

    #[test]
    fn filter_env_keeps_what_the_filter_keeps_with_the_given_prefix() {
        let env: HashMap<String, String> = [
            ("PATH", "/usr/bin"),
            ("ACME_MODE", "on"),
            ("PYKERNEL_MODE", "off"),
            ("GITHUB_TOKEN", "t"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        let kept = filter_env(&env, "ACME_");
        assert_eq!(
            kept.into_iter().collect::<Vec<_>>(),
            vec![
                ("ACME_MODE".to_string(), "on".to_string()),
                ("PATH".to_string(), "/usr/bin".to_string()),
            ]
        );
    }

    #[test]
    fn every_spelling_of_the_secret_pattern_is_dropped_even_under_an_allowed_prefix() {
        // Spelled out here, not taken from SECRET_SUBSTRINGS: losing one there must fail.
        let spellings = [
            "API_KEY",
            "API-KEY",
            "APIKEY",
            "SECRET",
            "TOKEN",
            "PASSWORD",
            "PASSWD",
            "CREDENTIAL",
            "ACCESS_KEY",
            "ACCESS-KEY",
            "ACCESSKEY",
            "PRIVATE_KEY",
            "PRIVATE-KEY",
            "PRIVATEKEY",
        ];
        let f = EnvFilter::new(DEFAULT_ENV_PREFIX);
        for spelling in spellings {
            for name in [
                format!("PYKERNEL_{spelling}"),
                format!("PYKERNEL_MY_{spelling}_FILE"),
                format!("XDG_{spelling}"),
                format!("LC_{}", spelling.to_ascii_lowercase()),
            ] {
                assert!(!f.verdict(&name).keeps(), "{name} must be dropped");
            }
        }
    }

    #[test]
    fn every_allowlist_entry_is_kept_and_every_denylist_entry_dropped() {
        let f = EnvFilter::new(DEFAULT_ENV_PREFIX);
        for name in ALLOWLIST {
            assert_eq!(f.verdict(name), Verdict::Allowed, "{name}");
        }
        for name in DENYLIST {
            assert_eq!(f.verdict(name), Verdict::Denied, "{name}");
        }
    }

    #[test]
    fn keeps_what_networks_and_tools_need_and_drops_the_ssh_agent() {
        for name in [
            "HTTP_PROXY",
            "https_proxy",
            "NO_PROXY",
            "SSL_CERT_FILE",
            "REQUESTS_CA_BUNDLE",
            "PIP_INDEX_URL",
            "CUDA_VISIBLE_DEVICES",
            "TOKENIZERS_PARALLELISM",
        ] {
            assert!(keeps(name), "{name} should be kept");
        }
        for name in ["SSH_AUTH_SOCK", "SSH_AGENT_PID", "TOKENIZERS_SECRET"] {
            assert!(!keeps(name), "{name} should be dropped");
        }
    }

    #[test]
    fn order_of_checks_is_observable() {
        let f = EnvFilter::new("PYKERNEL_");
        assert_eq!(f.verdict("OPENAI_API_KEY"), Verdict::Denied);
        assert_eq!(f.verdict("PATH"), Verdict::Allowed);
        assert_eq!(f.verdict("XDG_TOKEN_DIR"), Verdict::Secret);
        assert_eq!(f.verdict("LC_FOO"), Verdict::AllowedPrefix);
        assert_eq!(f.verdict("EDITOR"), Verdict::NotListed);
    }

    #[test]
    fn the_brand_prefix_is_configurable() {
        let f = EnvFilter::new("ACME_");
        assert!(f.verdict("ACME_MODE").keeps());
        assert!(!f.verdict("PYKERNEL_MODE").keeps());
        assert_eq!(f.verdict("ACME_SESSION"), Verdict::Denied);
    }
}
