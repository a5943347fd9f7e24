//! Which eval backends a host tool exposes (Python, JavaScript), from its settings and the
//! environment flags of both reference styles. Pure: the Python preflight is the caller's.
//!
//! - `mode` style (v1): `<PREFIX>PY` = `0`/`bash` -> JavaScript only, `1`/`py` -> Python
//!   only, `mix`/`both` -> both.
//! - `boolean` style (v2/v3): `<PREFIX>PY` and `<PREFIX>JS` are booleans, each overriding
//!   only its own setting; an unset or unreadable flag leaves the setting.
//!
//! The words `bash`, `py`, `mix` and `both` mean the same in either style; only `0`/`1`
//! (and other booleans) for `<PREFIX>PY` differ, which is why the style is the caller's
//! choice.

use std::collections::HashMap;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FlagStyle {
    Mode,
    Boolean,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Backends {
    pub py: bool,
    pub js: bool,
}

fn boolean(value: &str) -> Option<bool> {
    match value.trim().to_ascii_lowercase().as_str() {
        "1" | "true" | "yes" | "on" => Some(true),
        "0" | "false" | "no" | "off" => Some(false),
        _ => None,
    }
}

/// The backends to expose, before the Python preflight.
pub fn select(
    settings: Backends,
    env: &HashMap<String, String>,
    prefix: &str,
    style: FlagStyle,
) -> Backends {
    let mut out = settings;
    let py_flag = env
        .get(&format!("{prefix}PY"))
        .map(|v| v.trim().to_ascii_lowercase());
    match py_flag.as_deref() {
        Some("mix" | "both") => return Backends { py: true, js: true },
        Some("bash") => {
            return Backends {
                py: false,
                js: true,
            }
        }
        Some("py") => {
            return Backends {
                py: true,
                js: false,
            }
        }
        Some("0") if style == FlagStyle::Mode => {
            return Backends {
                py: false,
                js: true,
            }
        }
        Some("1") if style == FlagStyle::Mode => {
            return Backends {
                py: true,
                js: false,
            }
        }
        Some(value) if style == FlagStyle::Boolean => {
            if let Some(py) = boolean(value) {
                out.py = py;
            }
        }
        _ => {}
    }
    if style == FlagStyle::Boolean {
        if let Some(js) = env.get(&format!("{prefix}JS")).and_then(|v| boolean(v)) {
            out.js = js;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const BOTH: Backends = Backends { py: true, js: true };

    fn env(pairs: &[(&str, &str)]) -> HashMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn mode_style_values() {
        let pick = |v: &str| select(BOTH, &env(&[("X_PY", v)]), "X_", FlagStyle::Mode);
        assert_eq!(
            pick("0"),
            Backends {
                py: false,
                js: true
            }
        );
        assert_eq!(
            pick("bash"),
            Backends {
                py: false,
                js: true
            }
        );
        assert_eq!(
            pick("1"),
            Backends {
                py: true,
                js: false
            }
        );
        assert_eq!(
            pick("py"),
            Backends {
                py: true,
                js: false
            }
        );
        assert_eq!(pick("mix"), BOTH);
        assert_eq!(pick("BOTH"), BOTH);
        assert_eq!(pick("nonsense"), BOTH);
    }

    #[test]
    fn the_words_override_the_settings_in_either_style_and_the_digits_only_in_mode_style() {
        let only_js = Backends {
            py: false,
            js: true,
        };
        let only_py = Backends {
            py: true,
            js: false,
        };
        for style in [FlagStyle::Mode, FlagStyle::Boolean] {
            for word in ["mix", "both", "Both"] {
                assert_eq!(select(only_js, &env(&[("X_PY", word)]), "X_", style), BOTH);
                assert_eq!(select(only_py, &env(&[("X_PY", word)]), "X_", style), BOTH);
            }
            assert_eq!(
                select(only_py, &env(&[("X_PY", "bash")]), "X_", style),
                only_js
            );
            assert_eq!(
                select(only_js, &env(&[("X_PY", "py")]), "X_", style),
                only_py
            );
        }
        // Boolean style: `0`/`1` set Python alone and leave JavaScript to its setting.
        assert_eq!(
            select(only_py, &env(&[("X_PY", "0")]), "X_", FlagStyle::Boolean),
            Backends {
                py: false,
                js: false
            }
        );
        assert_eq!(
            select(BOTH, &env(&[("X_PY", "1")]), "X_", FlagStyle::Boolean),
            BOTH
        );
        // Mode style: they choose one backend.
        assert_eq!(
            select(only_py, &env(&[("X_PY", "0")]), "X_", FlagStyle::Mode),
            only_js
        );
        assert_eq!(
            select(BOTH, &env(&[("X_PY", "1")]), "X_", FlagStyle::Mode),
            only_py
        );
        // Mode style knows no booleans but `0`/`1`: `true` leaves the settings.
        assert_eq!(
            select(only_js, &env(&[("X_PY", "true")]), "X_", FlagStyle::Mode),
            only_js
        );
        // Mode style reads no `JS` flag.
        assert_eq!(
            select(only_py, &env(&[("X_JS", "1")]), "X_", FlagStyle::Mode),
            only_py
        );
    }

    #[test]
    fn boolean_style_overrides_only_its_own_setting() {
        let only_py = Backends {
            py: true,
            js: false,
        };
        assert_eq!(
            select(only_py, &env(&[("X_PY", "1")]), "X_", FlagStyle::Boolean),
            only_py
        );
        assert_eq!(
            select(BOTH, &env(&[("X_PY", "0")]), "X_", FlagStyle::Boolean),
            Backends {
                py: false,
                js: true
            }
        );
        assert_eq!(
            select(only_py, &env(&[("X_JS", "true")]), "X_", FlagStyle::Boolean),
            BOTH
        );
        assert_eq!(
            select(
                BOTH,
                &env(&[("X_PY", "1"), ("X_JS", "0")]),
                "X_",
                FlagStyle::Boolean
            ),
            only_py
        );
        assert_eq!(select(BOTH, &env(&[]), "X_", FlagStyle::Boolean), BOTH);
        assert_eq!(
            select(BOTH, &env(&[("X_PY", "maybe")]), "X_", FlagStyle::Boolean),
            BOTH
        );
    }
}
