//! A call's JavaScript arguments checked against what `index.d.ts` declares, before any
//! of them is converted: a value of the wrong type, or a key its options object does not
//! declare, is an `ERR_INVALID_ARG` that names it by its path (`code`,
//! `sandbox.writable[0]`, `cells[1].title`) and says what was expected and what came.
//!
//! Every entry point takes its arguments as `Unknown` (`ts_args_type` keeps the declared
//! signature) and calls [`check`] with its own signature from `signatures.rs`, which
//! `scripts/dts.js` generates from `index.d.ts`: the declarations are the one source of
//! the parameters' and fields' types and of the keys each options object has. Typed
//! arguments would be converted by napi-rs before our code runs, thrown synchronously
//! (even by a method that returns a Promise) with napi's status as their code and a
//! message in Rust's terms; and napi reads the fields it knows, ignoring the rest, so a
//! misspelt option (`sandbox: {writeable}`) would do nothing, silently. Once checked, a
//! value is converted by napi as before ([`convert`]); that cannot fail on its type.
//!
//! The check reads types only; values (ranges, choices among strings) are checked where
//! they are read, with their own messages.
//!
//! A new entry point: take each argument as `Unknown` (`Option<Unknown>` when it may be
//! left out) with `ts_args_type` saying its type, build (`scripts/dts.js` adds its
//! signature, e.g. `sig::KERNEL_IS_COMPLETE` for `Kernel#isComplete`), then
//! `args::check(env, sig::KERNEL_IS_COMPLETE, &[Some(code)])` and `convert` each argument;
//! an async one returns `rejected(env, err)` on an error, a sync one `Err(js_error(..))`.

use napi::bindgen_prelude::*;
use napi::sys;

use crate::error::KernelError;

pub(super) type Parsed<T> = std::result::Result<T, KernelError>;

/// A JavaScript type as `index.d.ts` declares it (see `scripts/option-table.js`).
pub enum Ty {
    /// `unknown`, or a type not checked here.
    Any,
    String,
    Number,
    Boolean,
    Null,
    Undefined,
    Function,
    /// Any object that is neither an array nor a function (`AbortSignal`, `{ ... }`).
    Object,
    Array(&'static Ty),
    /// `Record<string, T>`: any keys, each value a `T`.
    Record(&'static Ty),
    Interface(&'static Interface),
    Union(&'static [Ty]),
}

/// An options object: its keys, and no others.
pub struct Interface {
    pub name: &'static str,
    pub fields: &'static [Field],
}

pub struct Field {
    pub key: &'static str,
    pub ty: Ty,
    /// `undefined` and `null` are the field left out.
    pub optional: bool,
}

/// A parameter of an entry point.
pub struct Param {
    pub name: &'static str,
    pub ty: Ty,
    /// `undefined` and `null` are the argument left out.
    pub optional: bool,
}

/// What a JavaScript value is, as a message names it.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Kind {
    Undefined,
    Null,
    Boolean,
    Number,
    String,
    Symbol,
    Function,
    Array,
    Object,
    BigInt,
    Other,
}

impl Kind {
    fn described(self) -> &'static str {
        match self {
            Kind::Undefined => "undefined",
            Kind::Null => "null",
            Kind::Boolean => "a boolean",
            Kind::Number => "a number",
            Kind::String => "a string",
            Kind::Symbol => "a symbol",
            Kind::Function => "a function",
            Kind::Array => "an array",
            Kind::Object => "an object",
            Kind::BigInt => "a bigint",
            Kind::Other => "an unknown value",
        }
    }
}

impl Ty {
    fn accepts(&self, kind: Kind) -> bool {
        match self {
            Ty::Any => true,
            Ty::String => kind == Kind::String,
            Ty::Number => kind == Kind::Number,
            Ty::Boolean => kind == Kind::Boolean,
            Ty::Null => kind == Kind::Null,
            Ty::Undefined => kind == Kind::Undefined,
            Ty::Function => kind == Kind::Function,
            Ty::Object | Ty::Record(_) | Ty::Interface(_) => kind == Kind::Object,
            Ty::Array(_) => kind == Kind::Array,
            Ty::Union(of) => of.iter().any(|ty| ty.accepts(kind)),
        }
    }

    /// "a string", "an array of strings or a string".
    fn described(&self) -> String {
        match self {
            Ty::Any => "any value".into(),
            Ty::String => "a string".into(),
            Ty::Number => "a number".into(),
            Ty::Boolean => "a boolean".into(),
            Ty::Null => "null".into(),
            Ty::Undefined => "undefined".into(),
            Ty::Function => "a function".into(),
            Ty::Object | Ty::Record(_) | Ty::Interface(_) => "an object".into(),
            Ty::Array(of) => match of {
                Ty::String => "an array of strings".into(),
                Ty::Array(_) => "an array of arrays".into(),
                Ty::Interface(_) | Ty::Object => "an array of objects".into(),
                _ => "an array".into(),
            },
            Ty::Union(of) => {
                let mut parts: Vec<String> = Vec::new();
                for ty in of.iter() {
                    let part = ty.described();
                    if !parts.contains(&part) {
                        parts.push(part);
                    }
                }
                match parts.split_last() {
                    Some((last, rest)) if !rest.is_empty() => {
                        format!("{} or {last}", rest.join(", "))
                    }
                    _ => parts.concat(),
                }
            }
        }
    }
}

/// Checks the arguments of a call (`args[i]` for `params[i]`; `None` for one left out,
/// `undefined` or `null`) against its signature.
pub(super) fn check(env: &Env, params: &[Param], args: &[Option<Unknown>]) -> Parsed<()> {
    if params.len() != args.len() {
        // An entry point whose Rust parameters and `index.d.ts` signature differ.
        return Err(KernelError::Internal {
            reason: format!(
                "{} arguments checked against a signature of {} ({})",
                args.len(),
                params.len(),
                params.iter().map(|p| p.name).collect::<Vec<_>>().join(", ")
            ),
        });
    }
    let walk = Walk { env: env.raw() };
    for (param, arg) in params.iter().zip(args) {
        match arg {
            Some(value) => {
                let mut path = param.name.to_string();
                walk.value(value.raw(), &param.ty, &mut path, true)?;
            }
            None if param.optional => {}
            None => return Err(mismatch(param.name, &param.ty, Kind::Undefined)),
        }
    }
    Ok(())
}

/// A checked argument (or a part of one) as `T`.
pub(super) fn convert<T: FromNapiValue>(name: &str, value: Unknown) -> Parsed<T> {
    // SAFETY: the env and value of the call in progress.
    unsafe { T::from_napi_value(value.value().env, value.raw()) }
        .map_err(|e| unreadable(value.value().env, name, &e.reason))
}

/// [`convert`] for an argument that may be left out.
pub(super) fn convert_optional<T: FromNapiValue>(
    name: &str,
    value: Option<Unknown>,
) -> Parsed<Option<T>> {
    value.map(|value| convert(name, value)).transpose()
}

fn mismatch(path: &str, ty: &Ty, got: Kind) -> KernelError {
    KernelError::InvalidArgumentAt {
        path: path.to_string(),
        reason: format!("expected {}, got {}", ty.described(), got.described()),
    }
}

/// The error for a value napi could not read (a getter that threw, a Proxy): the
/// exception it left pending is taken, so the call can still settle with this one.
fn unreadable(env: sys::napi_env, path: &str, reason: &str) -> KernelError {
    let thrown = take_exception(env);
    KernelError::InvalidArgumentAt {
        path: path.to_string(),
        reason: format!("could not be read: {}", thrown.as_deref().unwrap_or(reason)),
    }
}

/// The message of the pending exception, which is cleared; None when there is none.
fn take_exception(env: sys::napi_env) -> Option<String> {
    let mut pending = false;
    // SAFETY: plain napi calls on the call's env.
    unsafe {
        if sys::napi_is_exception_pending(env, &mut pending) != sys::Status::napi_ok || !pending {
            return None;
        }
        let mut error = std::ptr::null_mut();
        sys::napi_get_and_clear_last_exception(env, &mut error);
        let message = Object::from_raw(env, error)
            .get_named_property_unchecked::<Unknown>("message")
            .ok()
            .filter(|m| m.get_type().ok() == Some(ValueType::String))
            .and_then(|m| m.cast::<String>().ok());
        Some(message.unwrap_or_else(|| "it threw".into()))
    }
}

struct Walk {
    env: sys::napi_env,
}

impl Walk {
    /// A napi call's status: a JavaScript exception (a getter, a Proxy's trap) is the
    /// value's fault, anything else the addon's (`ERR_INTERNAL`).
    fn ok(&self, status: sys::napi_status, path: &str) -> Parsed<()> {
        if status == sys::Status::napi_ok {
            return Ok(());
        }
        match take_exception(self.env) {
            Some(thrown) => Err(KernelError::InvalidArgumentAt {
                path: path.to_string(),
                reason: format!("could not be read: {thrown}"),
            }),
            None => Err(KernelError::Internal {
                reason: format!("napi status {status} while reading argument `{path}`"),
            }),
        }
    }

    fn kind(&self, value: sys::napi_value, path: &str) -> Parsed<Kind> {
        let mut t = 0;
        // SAFETY: a value of the call in progress.
        self.ok(unsafe { sys::napi_typeof(self.env, value, &mut t) }, path)?;
        Ok(match t {
            sys::ValueType::napi_undefined => Kind::Undefined,
            sys::ValueType::napi_null => Kind::Null,
            sys::ValueType::napi_boolean => Kind::Boolean,
            sys::ValueType::napi_number => Kind::Number,
            sys::ValueType::napi_string => Kind::String,
            sys::ValueType::napi_symbol => Kind::Symbol,
            sys::ValueType::napi_function => Kind::Function,
            sys::ValueType::napi_bigint => Kind::BigInt,
            sys::ValueType::napi_object => {
                let mut array = false;
                // SAFETY: as above.
                self.ok(
                    unsafe { sys::napi_is_array(self.env, value, &mut array) },
                    path,
                )?;
                if array {
                    Kind::Array
                } else {
                    Kind::Object
                }
            }
            _ => Kind::Other,
        })
    }

    /// Checks `value` at `path` (which it leaves as it found it) against `ty`; `argument`
    /// when it is a whole argument.
    fn value(
        &self,
        value: sys::napi_value,
        ty: &Ty,
        path: &mut String,
        argument: bool,
    ) -> Parsed<()> {
        let kind = self.kind(value, path)?;
        let ty = match ty {
            Ty::Union(of) => match of.iter().find(|ty| ty.accepts(kind)) {
                Some(ty) => ty,
                None => return Err(mismatch(path, ty, kind)),
            },
            ty if !ty.accepts(kind) => return Err(mismatch(path, ty, kind)),
            ty => ty,
        };
        match ty {
            Ty::Array(of) => self.array(value, of, path),
            Ty::Record(of) => self.record(value, of, path),
            // An options object's fields are named as options are (`sandbox.writable`),
            // not after the parameter that holds them.
            Ty::Interface(interface) if argument => {
                self.interface(value, interface, &mut String::new(), path)
            }
            Ty::Interface(interface) => {
                let name = path.clone();
                self.interface(value, interface, path, &name)
            }
            _ => Ok(()),
        }
    }

    fn array(&self, value: sys::napi_value, of: &Ty, path: &mut String) -> Parsed<()> {
        let mut len = 0;
        // SAFETY: an array of the call in progress.
        self.ok(
            unsafe { sys::napi_get_array_length(self.env, value, &mut len) },
            path,
        )?;
        for i in 0..len {
            let mut element = std::ptr::null_mut();
            // SAFETY: as above.
            self.ok(
                unsafe { sys::napi_get_element(self.env, value, i, &mut element) },
                path,
            )?;
            let at = path.len();
            path.push_str(&format!("[{i}]"));
            self.value(element, of, path, false)?;
            path.truncate(at);
        }
        Ok(())
    }

    /// The own enumerable string keys of `object`, as `Object.keys` gives them, each with
    /// the key as a JavaScript value.
    fn keys(&self, object: sys::napi_value, path: &str) -> Parsed<Vec<(String, sys::napi_value)>> {
        let mut names = std::ptr::null_mut();
        // SAFETY: an object of the call in progress.
        self.ok(
            unsafe {
                sys::napi_get_all_property_names(
                    self.env,
                    object,
                    sys::KeyCollectionMode::own_only,
                    sys::KeyFilter::enumerable | sys::KeyFilter::skip_symbols,
                    sys::KeyConversion::numbers_to_strings,
                    &mut names,
                )
            },
            path,
        )?;
        let mut len = 0;
        // SAFETY: the array napi just made.
        self.ok(
            unsafe { sys::napi_get_array_length(self.env, names, &mut len) },
            path,
        )?;
        let mut keys = Vec::with_capacity(len as usize);
        for i in 0..len {
            let mut key = std::ptr::null_mut();
            // SAFETY: as above; its elements are strings.
            self.ok(
                unsafe { sys::napi_get_element(self.env, names, i, &mut key) },
                path,
            )?;
            // SAFETY: a string, as asked for above.
            let name = unsafe { String::from_napi_value(self.env, key) }
                .map_err(|e| unreadable(self.env, path, &e.reason))?;
            keys.push((name, key));
        }
        Ok(keys)
    }

    fn property(
        &self,
        object: sys::napi_value,
        key: sys::napi_value,
        path: &str,
    ) -> Parsed<sys::napi_value> {
        let mut value = std::ptr::null_mut();
        // SAFETY: an object and a key of the call in progress.
        self.ok(
            unsafe { sys::napi_get_property(self.env, object, key, &mut value) },
            path,
        )?;
        Ok(value)
    }

    fn record(&self, value: sys::napi_value, of: &Ty, path: &mut String) -> Parsed<()> {
        for (name, key) in self.keys(value, path)? {
            let at = path.len();
            push_key(path, &name);
            let entry = self.property(value, key, path)?;
            // napi reads `undefined` as it reads `null`: absent.
            if !(of.accepts(Kind::Null) && self.kind(entry, path)? == Kind::Undefined) {
                self.value(entry, of, path, false)?;
            }
            path.truncate(at);
        }
        Ok(())
    }

    /// `name` is the object's own path, for a failure to read it.
    fn interface(
        &self,
        value: sys::napi_value,
        interface: &Interface,
        path: &mut String,
        name: &str,
    ) -> Parsed<()> {
        let object = name;
        for (name, key) in self.keys(value, object)? {
            let at = path.len();
            push_key(path, &name);
            let Some(field) = interface.fields.iter().find(|f| f.key == name) else {
                return Err(unknown_key(path, &name, interface));
            };
            let entry = self.property(value, key, path)?;
            let left_out = matches!(self.kind(entry, path)?, Kind::Undefined | Kind::Null);
            if !(field.optional && left_out) {
                self.value(entry, &field.ty, path, false)?;
            }
            path.truncate(at);
        }
        for field in interface.fields.iter().filter(|f| !f.optional) {
            let mut entry = std::ptr::null_mut();
            let name = std::ffi::CString::new(field.key).expect("a key without NUL");
            // SAFETY: an object of the call in progress.
            self.ok(
                unsafe { sys::napi_get_named_property(self.env, value, name.as_ptr(), &mut entry) },
                object,
            )?;
            if self.kind(entry, path)? == Kind::Undefined {
                push_key(path, field.key);
                return Err(mismatch(path, &field.ty, Kind::Undefined));
            }
        }
        Ok(())
    }
}

fn push_key(path: &mut String, key: &str) {
    if !path.is_empty() {
        path.push('.');
    }
    path.push_str(key);
}

/// "SandboxOptions has no key `writeable` (did you mean `writable`?); its keys are ..."
fn unknown_key(path: &str, key: &str, interface: &Interface) -> KernelError {
    let keys: Vec<&str> = interface.fields.iter().map(|f| f.key).collect();
    let hint = nearest(key, &keys)
        .map(|near| format!(" (did you mean `{near}`?)"))
        .unwrap_or_default();
    KernelError::InvalidArgumentAt {
        path: path.to_string(),
        reason: format!(
            "{} has no key `{key}`{hint}; its keys are {}",
            interface.name,
            keys.join(", ")
        ),
    }
}

/// The key of `known` that `key` most likely misspells, ignoring case: at most two edits
/// away (a letter added, dropped, changed, or two neighbours swapped: `timeout_ms`,
/// `netwrok`, `cdw`) and not mostly different.
fn nearest<'a>(key: &str, known: &[&'a str]) -> Option<&'a str> {
    let key = key.to_lowercase();
    let mut best = None;
    let mut best_distance = 3;
    for k in known {
        let d = edit_distance(&key, &k.to_lowercase());
        if d < best_distance && d * 2 < k.chars().count() {
            (best, best_distance) = (Some(*k), d);
        }
    }
    best
}

/// Optimal string alignment distance: Levenshtein's, with a swap of neighbours one edit.
fn edit_distance(a: &str, b: &str) -> usize {
    let (a, b): (Vec<char>, Vec<char>) = (a.chars().collect(), b.chars().collect());
    let mut d = vec![vec![0; b.len() + 1]; a.len() + 1];
    for (i, row) in d.iter_mut().enumerate() {
        row[0] = i;
    }
    for (j, cell) in d[0].iter_mut().enumerate() {
        *cell = j;
    }
    for i in 1..=a.len() {
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            d[i][j] = (d[i - 1][j] + 1)
                .min(d[i][j - 1] + 1)
                .min(d[i - 1][j - 1] + cost);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                d[i][j] = d[i][j].min(d[i - 2][j - 2] + 1);
            }
        }
    }
    d[a.len()][b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_likely_misspelling_is_named_and_nothing_else() {
        let keys = [
            "cwd",
            "interpreter",
            "startupTimeoutMs",
            "deadlineMs",
            "preload",
            "network",
        ];
        for (typo, meant) in [
            ("startup_timeout_ms", "startupTimeoutMs"),
            ("StartupTimeoutMs", "startupTimeoutMs"),
            ("interpeter", "interpreter"),
            ("prelaod", "preload"),
            ("cdw", "cwd"),
            ("deadline", "deadlineMs"),
            ("netwrok", "network"),
        ] {
            assert_eq!(nearest(typo, &keys), Some(meant), "{typo}");
        }
        for unrelated in ["colour", "docker", "io"] {
            assert_eq!(nearest(unrelated, &keys), None, "{unrelated}");
        }
        assert_eq!(edit_distance("ab", "ba"), 1);
    }

    static INNER: Interface = Interface {
        name: "Inner",
        fields: &[Field {
            key: "writable",
            ty: Ty::Union(&[Ty::Array(&Ty::String), Ty::String]),
            optional: true,
        }],
    };

    #[test]
    fn messages_say_what_was_expected_and_what_came() {
        let err = mismatch("code", &Ty::String, Kind::Number);
        assert_eq!(err.code(), "ERR_INVALID_ARG");
        assert_eq!(
            err.to_string(),
            "invalid argument `code`: expected a string, got a number"
        );
        static EITHER: Ty = Ty::Union(&[Ty::Boolean, Ty::Interface(&INNER), Ty::Null]);
        assert_eq!(EITHER.described(), "a boolean, an object or null");
        assert_eq!(
            INNER.fields[0].ty.described(),
            "an array of strings or a string"
        );
        assert_eq!(
            unknown_key("sandbox.writeable", "writeable", &INNER).to_string(),
            "invalid argument `sandbox.writeable`: Inner has no key `writeable` (did you mean `writable`?); its keys are writable"
        );
    }
}
