//! The typed getters of a [`Section`]: one value of each kind a config
//! key can hold (text, flag, integer, number, duration, size, lists), each
//! checked against its bound, with every problem recorded and `None`
//! returned for it.

use super::*;

impl<'a, 'i> Section<'a, 'i> {
    pub(crate) fn string(&self, key: impl KeyName) -> Option<At<String>> {
        let key = self.name_of(key);
        let v = self.raw(key)?;
        match v.get_ref().as_str() {
            Some(s) => Some(self.at(key, v, s.to_string())),
            None => {
                self.wrong_type(key, v, "a string", "\"...\"");
                None
            }
        }
    }

    pub(crate) fn bool(&self, key: impl KeyName) -> Option<bool> {
        let key = self.name_of(key);
        let v = self.raw(key)?;
        match v.get_ref().as_bool() {
            Some(b) => Some(b),
            None => {
                self.wrong_type(key, v, "true or false", "true");
                None
            }
        }
    }

    /// A whole-number key, within its declared bound.
    pub(crate) fn uint(&self, key: &Key) -> Option<u64> {
        let Kind::Uint { max } = key.kind else {
            unreachable!("{} is not a whole-number key", key.name)
        };
        self.uint_in(self.name_of(key), max)
    }

    /// A non-negative integer no larger than `max`.
    pub(crate) fn uint_in(&self, key: &'static str, max: u64) -> Option<u64> {
        let v = self.raw(key)?;
        let Some(int) = v.get_ref().as_integer() else {
            self.wrong_type(key, v, "an integer", "10");
            return None;
        };
        match u64::from_str_radix(int.as_str(), int.radix()) {
            Ok(n) if n <= max => Some(n),
            _ => {
                self.doc.report(
                    Some(v.span()),
                    &self.key_path(key),
                    format!("{} is out of range", int.as_str()),
                    Some(format!("use a whole number from 0 to {max}")),
                );
                None
            }
        }
    }

    /// A non-negative number (integer or decimal) no larger than `max`.
    pub(crate) fn number(&self, key: &'static str, max: f64) -> Option<f64> {
        let v = self.raw(key)?;
        let parsed = match v.get_ref() {
            DeValue::Integer(i) => i64::from_str_radix(i.as_str(), i.radix())
                .ok()
                .map(|n| n as f64),
            DeValue::Float(f) => f.as_str().parse::<f64>().ok(),
            _ => {
                self.wrong_type(key, v, "a number", "2.5");
                return None;
            }
        };
        match parsed {
            Some(n) if n.is_finite() && (0.0..=max).contains(&n) => Some(n),
            _ => {
                self.doc.report(
                    Some(v.span()),
                    &self.key_path(key),
                    "out of range".to_string(),
                    Some(format!("use a number from 0 to {max}")),
                );
                None
            }
        }
    }

    /// A duration key, within its declared bound.
    pub(crate) fn duration(&self, key: &Key) -> Option<Duration> {
        let Kind::Duration(bounds) = &key.kind else {
            unreachable!("{} is not a duration key", key.name)
        };
        self.duration_in(self.name_of(key), bounds.clone())
    }

    /// A duration written like `"10s"`, `"500ms"` or `"1m 30s"`, within
    /// `bounds` (an upper bound keeps every deadline computed from it from
    /// overflowing).
    pub(crate) fn duration_in(
        &self,
        key: &'static str,
        bounds: RangeInclusive<Duration>,
    ) -> Option<Duration> {
        let v = self.raw(key)?;
        let Some(s) = v.get_ref().as_str() else {
            self.wrong_type(key, v, "a duration string", "\"10s\"");
            return None;
        };
        let d = match humantime::parse_duration(s) {
            Ok(d) => d,
            Err(e) => {
                self.doc.report(
                    Some(v.span()),
                    &self.key_path(key),
                    format!("`{s}` is not a duration: {e}"),
                    Some("write it like \"10s\", \"500ms\" or \"2m\"".into()),
                );
                return None;
            }
        };
        if bounds.contains(&d) {
            return Some(d);
        }
        let (min, max) = (duration_text(*bounds.start()), duration_text(*bounds.end()));
        let message = if d > *bounds.end() {
            format!("`{s}` is longer than the longest allowed, {max}")
        } else if d.is_zero() {
            "must be greater than zero".to_string()
        } else {
            format!("`{s}` is shorter than the shortest allowed, {min}")
        };
        self.doc.report(
            Some(v.span()),
            &self.key_path(key),
            message,
            Some(format!("use a duration from \"{min}\" to \"{max}\"")),
        );
        None
    }

    /// A size key, within its declared bound.
    pub(crate) fn size(&self, key: &Key) -> Option<u64> {
        let Kind::Size { min, max } = key.kind else {
            unreachable!("{} is not a size key", key.name)
        };
        let n = self.size_in(self.name_of(key), max)?;
        if n < min {
            self.problem(
                key.name,
                format!("{n} bytes is less than {}", size_text(min)),
                Some(format!(
                    "use a size from \"{}\" to \"{}\", like \"{}\"",
                    size_text(min),
                    size_text(max),
                    size_text(key.size())
                )),
            );
            return None;
        }
        Some(n)
    }

    /// A byte size written as an integer or a string like `"10MiB"`, at
    /// most `max` bytes.
    pub(crate) fn size_in(&self, key: &'static str, max: u64) -> Option<u64> {
        let v = self.raw(key)?;
        let n = if let Some(int) = v.get_ref().as_integer() {
            u64::from_str_radix(int.as_str(), int.radix()).ok()
        } else if let Some(s) = v.get_ref().as_str() {
            match s.parse::<bytesize::ByteSize>() {
                Ok(b) => Some(b.as_u64()),
                Err(e) => {
                    self.doc.report(
                        Some(v.span()),
                        &self.key_path(key),
                        format!("`{s}` is not a size: {e}"),
                        Some("write it like \"512KiB\", \"10MiB\" or a number of bytes".into()),
                    );
                    return None;
                }
            }
        } else {
            self.wrong_type(key, v, "a size", "\"10MiB\"");
            return None;
        };
        // A negative integer, or a size so large it saturated on parsing,
        // is out of range like any size over `max`.
        match n {
            Some(n) if n <= max => Some(n),
            _ => {
                self.doc.report(
                    Some(v.span()),
                    &self.key_path(key),
                    format!("{} is out of range", self.doc.source(v.span())),
                    Some(format!("use a size from 0 to \"{}\"", size_text(max))),
                );
                None
            }
        }
    }

    /// A list of strings; a single string is accepted as a list of one.
    pub(crate) fn string_list(&self, key: impl KeyName) -> Option<Vec<At<String>>> {
        let key = self.name_of(key);
        let v = self.raw(key)?;
        if let Some(s) = v.get_ref().as_str() {
            return Some(vec![self.at(key, v, s.to_string())]);
        }
        let Some(items) = v.get_ref().as_array() else {
            self.wrong_type(key, v, "a list of strings", "[\"...\"]");
            return None;
        };
        let mut out = Vec::new();
        for (i, item) in items.iter().enumerate() {
            match item.get_ref().as_str() {
                Some(s) => out.push(At {
                    value: s.to_string(),
                    span: item.span(),
                    key: format!("{}[{i}]", self.key_path(key)),
                }),
                None => self.doc.report(
                    Some(item.span()),
                    &format!("{}[{i}]", self.key_path(key)),
                    format!("expected a string, found {}", item.get_ref().type_str()),
                    None,
                ),
            }
        }
        Some(out)
    }

    /// A list of integers, each no larger than `max`.
    pub(crate) fn uint_list(&self, key: &'static str, max: u64) -> Option<Vec<At<u64>>> {
        let v = self.raw(key)?;
        let Some(items) = v.get_ref().as_array() else {
            self.wrong_type(key, v, "a list of integers", "[429, 503]");
            return None;
        };
        let mut out = Vec::new();
        for (i, item) in items.iter().enumerate() {
            let path = format!("{}[{i}]", self.key_path(key));
            let parsed = item
                .get_ref()
                .as_integer()
                .and_then(|int| u64::from_str_radix(int.as_str(), int.radix()).ok())
                .filter(|n| *n <= max);
            match parsed {
                Some(n) => out.push(At {
                    value: n,
                    span: item.span(),
                    key: path,
                }),
                None => self.doc.report(
                    Some(item.span()),
                    &path,
                    "expected a whole number in range".into(),
                    Some(format!("use a number from 0 to {max}")),
                ),
            }
        }
        Some(out)
    }
}
