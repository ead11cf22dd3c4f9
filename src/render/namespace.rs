//! Jinja2's `namespace()`, the checks on values a template keeps, and Python's `repr()`/`str()`
//! of template values.
//!
//! Jinja2's `Namespace` is a plain Python object: not iterable, not a mapping, not JSON
//! serialisable, equal only to itself, true, printed as `<Namespace {...}>`. minijinja's own is
//! a map, which every walk over values enters (printing, `tojson`, `==`, sorting, hashing), so
//! a namespace holding itself (`{% set ns.a = ns %}`) sent each of them around the cycle until
//! the stack overflowed. This one is opaque as Python's is: minijinja never looks inside, and
//! kvaudit's own printing marks a namespace it is already printing, as Python's `repr` does.
//! minijinja assigns attributes only to its own namespace type, so `guard::instrument` turns
//! `{% set ns.a = v %}` into a call of [`setattr`].
//!
//! A kept value is checked once, when it is kept ([`bind`], [`setattr`]): nested at most
//! [`MAX_VALUE_DEPTH`] levels, and a namespace holds no other namespace (it may hold itself,
//! as in Python): so no walk over values can go around a cycle or deeper than the stack
//! allows, and nothing built later can deepen a kept value.

use std::cmp::Ordering;
use std::fmt;
use std::sync::{Arc, Mutex};

use minijinja::value::{
    DynObject, Kwargs, Object, ObjectRepr, Rest, Tuple, ValueKind, ValueOrKwargs,
};
use minijinja::{Error, ErrorKind, State, Value};

use super::limits::{max_output, too_large};

/// The deepest value a template may keep. Python's own `repr` and `json.dumps` stop near 1000
/// levels (its recursion limit); real templates keep values a few levels deep. Walks over a
/// value take ~500 bytes of stack per level (measured: printing, `tojson` and `==` in a
/// release build), so a kept value plus what one expression nests on it stays well within a
/// 2 MB thread stack.
pub const MAX_VALUE_DEPTH: usize = 500;

/// A Jinja2 namespace: attributes in the order they were first set, as a Python dict keeps
/// them.
#[derive(Default)]
pub struct Namespace {
    attrs: Mutex<Vec<(Value, Value)>>,
}

impl Namespace {
    fn entries(&self) -> Vec<(Value, Value)> {
        self.attrs.lock().map(|a| a.clone()).unwrap_or_default()
    }

    fn set(&self, key: Value, value: Value) {
        if let Ok(mut attrs) = self.attrs.lock() {
            match attrs.iter_mut().find(|(k, _)| *k == key) {
                Some(slot) => slot.1 = value,
                None => attrs.push((key, value)),
            }
        }
    }
}

impl fmt::Debug for Namespace {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut printer = Printer::default();
        printer.namespace(self, f)
    }
}

impl Object for Namespace {
    fn repr(self: &Arc<Self>) -> ObjectRepr {
        ObjectRepr::Plain
    }

    fn get_value(self: &Arc<Self>, key: &Value) -> Option<Value> {
        let attrs = self.attrs.lock().ok()?;
        attrs.iter().find(|(k, _)| k == key).map(|(_, v)| v.clone())
    }

    fn is_true(self: &Arc<Self>) -> bool {
        true
    }

    /// `ns.f(...)` calls the attribute, as Python does (a macro kept in a namespace).
    fn call_method(
        self: &Arc<Self>,
        state: &mut State<'_, '_>,
        method: &str,
        args: &[Value],
    ) -> Result<Value, Error> {
        match self.get_value(&Value::from(method)) {
            Some(attr) => attr.call(state, args),
            None => Err(Error::from(ErrorKind::UnknownMethod)),
        }
    }

    /// Python compares namespaces by identity.
    fn custom_cmp(self: &Arc<Self>, other: &DynObject) -> Option<Ordering> {
        let other = other.downcast_ref::<Namespace>()?;
        let (a, b) = (
            Arc::as_ptr(self) as usize,
            other as *const Namespace as usize,
        );
        Some(a.cmp(&b))
    }
}

thread_local! {
    /// The namespaces of the render running on this thread: emptied when it ends, so one that
    /// holds itself does not outlive the render with whatever it holds.
    static CREATED: std::cell::RefCell<Vec<Arc<Namespace>>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// Empties the namespaces the render on this thread made (call when a render ends).
pub fn release_namespaces() {
    let created = CREATED.with_borrow_mut(std::mem::take);
    for ns in created {
        let attrs = ns.attrs.lock().map(|mut a| std::mem::take(&mut *a));
        drop(attrs);
    }
}

fn type_error(text: impl Into<String>) -> Error {
    Error::new(ErrorKind::InvalidOperation, text.into())
}

/// `namespace(*args, **kwargs)`: Python's `dict(*args, **kwargs)` as attributes.
pub fn namespace(state: &State, args: Rest<ValueOrKwargs>) -> Result<Value, Error> {
    let ns = Arc::new(Namespace::default());
    let mut positional = Vec::new();
    let mut keywords = None;
    for arg in args.into_values() {
        if arg.is_kwargs() {
            keywords = Some(Kwargs::try_from(arg)?);
        } else {
            positional.push(arg);
        }
    }
    if positional.len() > 1 {
        return Err(type_error(format!(
            "dict expected at most 1 argument, got {}",
            positional.len()
        )));
    }
    if let Some(source) = positional.pop() {
        let source_pairs: Vec<(Value, Value)> = match source.kind() {
            ValueKind::Map => source
                .try_iter()?
                .map(|k| {
                    let v = source.get_item(&k)?;
                    Ok((k, v))
                })
                .collect::<Result<_, Error>>()?,
            _ => source
                .try_iter()?
                .map(|pair| {
                    let items: Vec<Value> = pair.try_iter()?.collect();
                    match <[Value; 2]>::try_from(items) {
                        Ok([k, v]) => Ok((k, v)),
                        Err(_) => Err(type_error(
                            "dictionary update sequence element has the wrong length; 2 is required",
                        )),
                    }
                })
                .collect::<Result<_, Error>>()?,
        };
        for (k, v) in source_pairs {
            check_kept(state, &v, Some(&ns))?;
            ns.set(k, v);
        }
    }
    if let Some(kwargs) = keywords {
        for key in kwargs.args() {
            let v: Value = kwargs.get(key)?;
            check_kept(state, &v, Some(&ns))?;
            ns.set(Value::from(key), v);
        }
    }
    CREATED.with_borrow_mut(|c| c.push(ns.clone()));
    Ok(Value::from_dyn_object(ns))
}

/// `{% set ns.attr = value %}` (see `guard::instrument`).
pub fn setattr(state: &State, target: &Value, attr: &str, value: Value) -> Result<Value, Error> {
    let Some(ns) = target.downcast_object::<Namespace>() else {
        return Err(type_error(
            "cannot assign attribute on non-namespace object",
        ));
    };
    check_kept(state, &value, Some(&ns))?;
    ns.set(Value::from(attr), value);
    Ok(Value::from(()))
}

/// A macro or `caller` argument, or a recursive loop's item, as it is bound (see
/// `guard::instrument`): what a recursion feeds back to itself.
pub fn bind(state: &State, value: Value) -> Result<Value, Error> {
    check_kept(state, &value, None)?;
    Ok(value)
}

/// How many items a value check visits per unit of fuel: keeping a value costs time in
/// proportion to its size, so a template that keeps a growing list in a loop runs out of fuel
/// instead of running in quadratic time. minijinja charges half a fuel per item its own filters
/// visit; this is cheaper, so real templates barely notice.
const ITEMS_PER_FUEL: u64 = 64;

/// Checks a value about to be kept: nested at most [`MAX_VALUE_DEPTH`] levels, and, when kept
/// in the namespace `target`, holding no namespace but `target` itself.
fn check_kept(state: &State, value: &Value, target: Option<&Arc<Namespace>>) -> Result<(), Error> {
    let mut visited = 0u64;
    walk(state, target, value, 0, &mut visited)
}

fn walk(
    state: &State,
    target: Option<&Arc<Namespace>>,
    value: &Value,
    level: usize,
    visited: &mut u64,
) -> Result<(), Error> {
    if level > MAX_VALUE_DEPTH {
        return Err(super::limits::limit_error(format!(
            "the template keeps a value nested more than {MAX_VALUE_DEPTH} levels deep"
        )));
    }
    let Some(obj) = value.as_object() else {
        return Ok(());
    };
    *visited += 1;
    if visited.is_multiple_of(ITEMS_PER_FUEL) {
        state.consume_fuel(1)?;
    }
    if let Some(ns) = obj.downcast_ref::<Namespace>() {
        return match target {
            Some(target) if !std::ptr::eq(Arc::as_ptr(target), ns) => Err(type_error(
                "kvaudit does not render a namespace stored inside another namespace",
            )
            .with_source(super::error::NotSupported)),
            _ => Ok(()),
        };
    }
    match obj.repr() {
        ObjectRepr::Map => {
            for (k, v) in obj.try_iter_pairs().into_iter().flatten() {
                walk(state, target, &k, level + 1, visited)?;
                walk(state, target, &v, level + 1, visited)?;
            }
        }
        ObjectRepr::Seq | ObjectRepr::Iterable => {
            for item in obj.try_iter().into_iter().flatten() {
                walk(state, target, &item, level + 1, visited)?;
            }
        }
        _ => {}
    }
    Ok(())
}

/// A `fmt::Write` that stops at `limit` bytes.
pub struct Bounded<'a, W: fmt::Write + ?Sized> {
    pub out: &'a mut W,
    pub written: usize,
    pub limit: usize,
    pub exceeded: bool,
}

impl<'a, W: fmt::Write + ?Sized> Bounded<'a, W> {
    pub fn new(out: &'a mut W, limit: usize) -> Self {
        Bounded {
            out,
            written: 0,
            limit,
            exceeded: false,
        }
    }
}

impl<W: fmt::Write + ?Sized> fmt::Write for Bounded<'_, W> {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        self.written = self.written.saturating_add(s.len());
        if self.written > self.limit {
            self.exceeded = true;
            return Err(fmt::Error);
        }
        self.out.write_str(s)
    }
}

/// Python's `repr()` as Jinja2 prints containers: the containers being printed, so one met
/// again prints as Python's recursion marker (`[...]`, `{...}`, `<Namespace {...}>`).
#[derive(Default)]
struct Printer {
    open: Vec<usize>,
}

thread_local! {
    /// Namespaces being printed on this thread: a namespace printed by minijinja (inside one
    /// of its lists) starts a printer of its own, which must still see the outer ones.
    static PRINTING: std::cell::RefCell<Vec<usize>> = const { std::cell::RefCell::new(Vec::new()) };
}

impl Printer {
    fn namespace(&mut self, ns: &Namespace, f: &mut dyn fmt::Write) -> fmt::Result {
        let id = ns as *const Namespace as usize;
        let reentered = self.open.contains(&id) || PRINTING.with_borrow(|p| p.contains(&id));
        if reentered || self.open.len() > 2 * MAX_VALUE_DEPTH {
            return f.write_str("<Namespace {...}>");
        }
        self.open.push(id);
        PRINTING.with_borrow_mut(|p| p.push(id));
        let result = (|| {
            f.write_str("<Namespace {")?;
            for (i, (k, v)) in ns.entries().iter().enumerate() {
                if i > 0 {
                    f.write_str(", ")?;
                }
                self.value(k, f)?;
                f.write_str(": ")?;
                self.value(v, f)?;
            }
            f.write_str("}>")
        })();
        PRINTING.with_borrow_mut(|p| p.pop());
        self.open.pop();
        result
    }

    fn value(&mut self, value: &Value, f: &mut dyn fmt::Write) -> fmt::Result {
        match value.kind() {
            ValueKind::Undefined => f.write_str("Undefined"),
            ValueKind::Number if !value.is_integer() => match f64::try_from(value.clone()) {
                Ok(x) => f.write_str(&python_float_repr(x)),
                Err(_) => write!(f, "{value}"),
            },
            ValueKind::String if value.is_safe() => write!(f, "Markup({value:?})"),
            ValueKind::String | ValueKind::Bytes | ValueKind::Bool | ValueKind::None => {
                write!(f, "{value:?}")
            }
            ValueKind::Number => write!(f, "{value}"),
            _ => self.object(value, f),
        }
    }

    fn object(&mut self, value: &Value, f: &mut dyn fmt::Write) -> fmt::Result {
        let Some(obj) = value.as_object() else {
            return write!(f, "{value}");
        };
        if let Some(ns) = obj.downcast_ref::<Namespace>() {
            return self.namespace(ns, f);
        }
        let tuple = obj.downcast_ref::<Tuple>().is_some();
        let (open, close, marker) = match obj.repr() {
            ObjectRepr::Map => ("{", "}", "{...}"),
            ObjectRepr::Seq | ObjectRepr::Iterable if obj.enumerator_len().is_some() => {
                if tuple {
                    ("(", ")", "(...)")
                } else {
                    ("[", "]", "[...]")
                }
            }
            _ => return write!(f, "{value}"),
        };
        let id = container_id(obj).unwrap_or(0);
        if (id != 0 && self.open.contains(&id)) || self.open.len() > 2 * MAX_VALUE_DEPTH {
            return f.write_str(marker);
        }
        self.open.push(id);
        let result = (|| {
            f.write_str(open)?;
            if obj.repr() == ObjectRepr::Map {
                for (i, (k, v)) in obj.try_iter_pairs().into_iter().flatten().enumerate() {
                    if i > 0 {
                        f.write_str(", ")?;
                    }
                    self.value(&k, f)?;
                    f.write_str(": ")?;
                    self.value(&v, f)?;
                }
            } else {
                let mut count = 0;
                for (i, item) in obj.try_iter().into_iter().flatten().enumerate() {
                    if i > 0 {
                        f.write_str(", ")?;
                    }
                    self.value(&item, f)?;
                    count += 1;
                }
                if tuple && count == 1 {
                    f.write_str(",")?;
                }
            }
            f.write_str(close)
        })();
        self.open.pop();
        result
    }
}

/// The address of a list, dict or tuple made by the template (the containers a namespace can
/// be found in again while it is printed); `None` for other objects, which cannot hold one.
fn container_id(obj: &DynObject) -> Option<usize> {
    if let Some(v) = obj.downcast_ref::<Vec<Value>>() {
        return Some(v as *const Vec<Value> as usize);
    }
    if let Some(m) = obj.downcast_ref::<indexmap::IndexMap<Value, Value>>() {
        return Some(m as *const indexmap::IndexMap<Value, Value> as usize);
    }
    obj.downcast_ref::<Tuple>()
        .map(|t| t as *const Tuple as usize)
}

/// Python's `repr()` of `value`, written to `out`.
pub fn write_repr(value: &Value, out: &mut dyn fmt::Write) -> fmt::Result {
    Printer::default().value(value, out)
}

/// Python's `repr(float)`: shortest round-trip digits, scientific notation when the decimal
/// exponent is below -4 or at least 16, with a signed two-digit exponent.
pub fn python_float_repr(f: f64) -> String {
    if f.is_nan() {
        return "nan".into();
    }
    if f.is_infinite() {
        return if f > 0.0 { "inf".into() } else { "-inf".into() };
    }
    if f == 0.0 {
        return if f.is_sign_negative() {
            "-0.0".into()
        } else {
            "0.0".into()
        };
    }
    let sci = format!("{:e}", f);
    let (mantissa, exp) = sci.split_once('e').unwrap_or((&sci, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    if (-4..16).contains(&exp) {
        let fixed = format!("{}", f);
        if fixed.contains('.') {
            fixed
        } else {
            format!("{fixed}.0")
        }
    } else {
        let sign = if exp < 0 { '-' } else { '+' };
        format!("{mantissa}e{sign}{:02}", exp.abs())
    }
}

/// Python's `str()` of `value` (what `~`, `|string` and `join` make of it), refused past
/// [`MAX_OUTPUT`] bytes: a list that repeats one long string is small but prints as
/// gigabytes.
pub fn py_str(value: &Value, what: &str) -> Result<String, Error> {
    let mut out = String::new();
    write_str(value, what, max_output(), &mut out)?;
    Ok(out)
}

/// [`py_str`] appended to `out`, refused once `out` would pass `limit` bytes.
pub fn write_str(value: &Value, what: &str, limit: usize, out: &mut String) -> Result<(), Error> {
    let room = limit.saturating_sub(out.len());
    match value.kind() {
        ValueKind::String | ValueKind::Bytes => {
            let s = value.as_str().unwrap_or_default();
            if s.len() > room {
                return Err(too_large(what));
            }
            super::limits::reserve_str_within(out, s.len(), limit);
            out.push_str(s);
            Ok(())
        }
        ValueKind::Undefined => Ok(()),
        _ => {
            // Measured first, then made at its size: a string grown to the limit by doubling
            // would ask for twice the limit.
            let size = repr_len(value, room).ok_or_else(|| too_large(what))?;
            super::limits::reserve_str_within(out, size, limit);
            write_repr(value, out)
                .map_err(|_| Error::new(ErrorKind::WriteFailure, "formatting failed"))
        }
    }
}

/// The length of Python's `repr()` of `value`, or `None` past `limit` bytes (measured without
/// making it).
pub fn repr_len(value: &Value, limit: usize) -> Option<usize> {
    struct Sink;
    impl fmt::Write for Sink {
        fn write_str(&mut self, _: &str) -> fmt::Result {
            Ok(())
        }
    }
    let mut sink = Sink;
    let mut bounded = Bounded::new(&mut sink, limit);
    let _ = write_repr(value, &mut bounded);
    (!bounded.exceeded).then_some(bounded.written)
}

/// `~`'s operands (see `guard::instrument`): Jinja2 joins them with `str()`, and with autoescape
/// off the result is a plain string even of `Markup` operands.
pub fn str_function(value: Value) -> Result<Value, Error> {
    if value.kind() == ValueKind::String && !value.is_safe() {
        return Ok(value);
    }
    py_str(&value, "~").map(Value::from)
}

/// `needle in haystack` (see `guard::operators::rewrite_containment`), as Python's `in`: a
/// string holds only strings; a list or other iterable holds what equals an item; a mapping
/// its keys; an undefined value nothing. Visiting items costs fuel, as minijinja's own `in`
/// does.
pub fn contains(state: &State, needle: Value, haystack: Value) -> Result<bool, Error> {
    match haystack.kind() {
        ValueKind::String => {
            let Some(n) = needle
                .as_str()
                .filter(|_| needle.kind() == ValueKind::String)
            else {
                return Err(type_error(format!(
                    "'in <string>' requires string as left operand, not {}",
                    python_type(&needle)
                )));
            };
            let h = haystack.as_str().unwrap_or_default();
            state.consume_fuel(h.len() as u64 / 64)?;
            Ok(h.contains(n))
        }
        ValueKind::Undefined => Ok(false),
        ValueKind::Seq | ValueKind::Iterable => {
            for (i, item) in haystack.try_iter()?.enumerate() {
                if i % ITEMS_PER_FUEL as usize == ITEMS_PER_FUEL as usize - 1 {
                    state.consume_fuel(1)?;
                }
                if item == needle {
                    return Ok(true);
                }
            }
            Ok(false)
        }
        ValueKind::Map => Ok(haystack
            .as_object()
            .and_then(|o| o.get_value(&needle))
            .is_some()),
        _ if is_namespace(&haystack) => {
            Err(type_error("argument of type 'Namespace' is not iterable"))
        }
        ValueKind::Plain => Ok(false),
        _ => Err(type_error(format!(
            "argument of type '{}' is not iterable",
            python_type(&haystack)
        ))),
    }
}

/// Python's name for the type of a template value, as its error messages give it.
pub fn python_type(value: &Value) -> &'static str {
    match value.kind() {
        ValueKind::Undefined => "Undefined",
        ValueKind::None => "NoneType",
        ValueKind::Bool => "bool",
        ValueKind::Number if value.is_integer() => "int",
        ValueKind::Number => "float",
        ValueKind::String if value.is_safe() => "Markup",
        ValueKind::String => "str",
        ValueKind::Seq if value.downcast_object_ref::<Tuple>().is_some() => "tuple",
        ValueKind::Seq => "list",
        ValueKind::Map => "dict",
        _ if is_namespace(value) => "Namespace",
        _ => "object",
    }
}

/// Whether `value` is a namespace (which Python's JSON encoder refuses, by its type name).
pub fn is_namespace(value: &Value) -> bool {
    value.downcast_object_ref::<Namespace>().is_some()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn float_repr_matches_python() {
        for (f, want) in [
            (1.0, "1.0"),
            (1e16, "1e+16"),
            (1e15, "1000000000000000.0"),
            (1e-5, "1e-05"),
            (0.0001, "0.0001"),
            (1.5e-7, "1.5e-07"),
            (-2.5, "-2.5"),
            (0.1 + 0.2, "0.30000000000000004"),
            (1.23e100, "1.23e+100"),
        ] {
            assert_eq!(python_float_repr(f), want, "{f}");
        }
    }
}
