//! `${VAR}` and `${VAR:-default}` in suite values, so one suite can point at
//! the simulator on a laptop and at a real server in CI.

/// Why a value could not be interpolated.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum InterpolateError {
    /// `${NAME}` with no default and `NAME` unset.
    #[error("environment variable `{0}` is not set and has no default (write `${{{0}:-default}}`)")]
    Unset(String),
    /// `${` without a closing brace, or an empty name.
    #[error("malformed `${{…}}` at byte {0}: expected `${{NAME}}` or `${{NAME:-default}}`")]
    Malformed(usize),
    /// Defaults nested deeper than [`MAX_DEPTH`].
    #[error("`${{…:-…}}` defaults nested more than {MAX_DEPTH} deep at byte {0}")]
    TooDeep(usize),
}

/// How deep `${A:-${B:-…}}` defaults may nest: a few levels are a fallback
/// chain; thousands are an attack on the stack.
pub(crate) const MAX_DEPTH: usize = 16;

/// Replaces `${NAME}` / `${NAME:-default}` using `lookup`; `$$` is a literal `$`.
/// A default may itself hold `${…}` (`${LLAMA:-${HOME}/bin/llama-server}`),
/// read only when it is used.
pub(crate) fn interpolate(
    text: &str,
    lookup: impl Fn(&str) -> Option<String>,
) -> Result<String, InterpolateError> {
    expand(text, &lookup, 0, 0)
}

/// The length of `${…}`'s body up to its matching `}`, nested `${` counted.
fn body_len(body: &str) -> Option<usize> {
    let bytes = body.as_bytes();
    let mut depth = 0usize;
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'$' if bytes.get(i + 1) == Some(&b'{') => {
                depth += 1;
                i += 1;
            }
            b'}' if depth == 0 => return Some(i),
            b'}' => depth -= 1,
            _ => {}
        }
        i += 1;
    }
    None
}

fn expand(
    text: &str,
    lookup: &dyn Fn(&str) -> Option<String>,
    base: usize,
    depth: usize,
) -> Result<String, InterpolateError> {
    if depth > MAX_DEPTH {
        return Err(InterpolateError::TooDeep(base));
    }
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    let mut offset = base;
    while let Some(pos) = rest.find('$') {
        out.push_str(&rest[..pos]);
        let after = &rest[pos + 1..];
        if let Some(tail) = after.strip_prefix('$') {
            out.push('$');
            offset += pos + 2;
            rest = tail;
        } else if let Some(body) = after.strip_prefix('{') {
            let end = body_len(body).ok_or(InterpolateError::Malformed(offset + pos))?;
            let expr = &body[..end];
            let (name, default) = match expr.split_once(":-") {
                Some((n, d)) => (n, Some(d)),
                None => (expr, None),
            };
            let valid =
                !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
            if !valid {
                return Err(InterpolateError::Malformed(offset + pos));
            }
            match lookup(name).filter(|v| !v.is_empty()) {
                Some(value) => out.push_str(&value),
                None => match default {
                    Some(d) => out.push_str(&expand(
                        d,
                        lookup,
                        offset + pos + 2 + name.len() + 2,
                        depth + 1,
                    )?),
                    None => return Err(InterpolateError::Unset(name.to_owned())),
                },
            }
            let consumed = pos + 2 + end + 1;
            offset += consumed;
            rest = &rest[consumed..];
        } else {
            out.push('$');
            offset += pos + 1;
            rest = after;
        }
    }
    out.push_str(rest);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(name: &str) -> Option<String> {
        match name {
            "URL" => Some("http://gpu:30000".into()),
            "EMPTY" => Some(String::new()),
            _ => None,
        }
    }

    #[test]
    fn substitutes_and_defaults() {
        assert_eq!(interpolate("${URL}", env).unwrap(), "http://gpu:30000");
        assert_eq!(interpolate("${NOPE:-sim}", env).unwrap(), "sim");
        assert_eq!(interpolate("${URL:-sim}", env).unwrap(), "http://gpu:30000");
        assert_eq!(interpolate("x${EMPTY:-d}y", env).unwrap(), "xdy");
        assert_eq!(interpolate("a$$b $x", env).unwrap(), "a$b $x");
        assert_eq!(interpolate("no vars", env).unwrap(), "no vars");
        assert_eq!(interpolate("${NOPE:-}", env).unwrap(), "");
        assert_eq!(
            interpolate("${NOPE:-${URL}/v1}", env).unwrap(),
            "http://gpu:30000/v1"
        );
        assert_eq!(
            interpolate("${URL:-${NOPE}}/x", env).unwrap(),
            "http://gpu:30000/x"
        );
        assert_eq!(
            interpolate("${NOPE:-${ALSO_NOPE}}", env),
            Err(InterpolateError::Unset("ALSO_NOPE".into()))
        );
    }

    #[test]
    fn errors_name_the_variable() {
        assert_eq!(
            interpolate("${NOPE}", env),
            Err(InterpolateError::Unset("NOPE".into()))
        );
        assert_eq!(
            interpolate("ab${URL", env),
            Err(InterpolateError::Malformed(2))
        );
        assert_eq!(
            interpolate("${bad-name}", env),
            Err(InterpolateError::Malformed(0))
        );
    }
}
