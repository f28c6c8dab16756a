//! URL text of the HTTP clients (the schema registry, REST catalogs).

/// `text` as one path segment or query value: every byte but the unreserved ones
/// (letters, digits, `-`, `.`, `_`, `~`) percent-encoded.
pub fn percent_encode(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for byte in text.bytes() {
        match byte {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                out.push(byte as char)
            }
            other => out.push_str(&format!("%{other:02X}")),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::percent_encode;

    #[test]
    fn names_become_one_path_segment() {
        assert_eq!(percent_encode("orders-value"), "orders-value");
        assert_eq!(percent_encode("orders_2024.v1~"), "orders_2024.v1~");
        assert_eq!(percent_encode("a/b c%"), "a%2Fb%20c%25");
    }
}
