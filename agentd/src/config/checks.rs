//! Small checks that both the file's own tables (`file.rs`) and its personas (`agents.rs`)
//! make: which line of the file a value is on, and whether a text names an environment variable.

/// The line (counting from 1) of the byte `offset` of `text`.
pub(super) fn line_at(text: &str, offset: usize) -> usize {
    text.as_bytes()
        .iter()
        .take(offset)
        .filter(|b| **b == b'\n')
        .count()
        + 1
}

pub(super) use confine_protocol::environment::is_variable_name;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_count_from_one() {
        let text = "a\nb\nc";
        assert_eq!(line_at(text, 0), 1);
        assert_eq!(line_at(text, 2), 2);
        assert_eq!(line_at(text, 4), 3);
        assert_eq!(line_at(text, 99), 3);
    }

    #[test]
    fn a_variable_name_is_letters_digits_and_underscores_not_starting_with_a_digit() {
        assert!(is_variable_name("DEEPSEEK_API_KEY"));
        assert!(is_variable_name("_x1"));
        assert!(!is_variable_name("1X"));
        assert!(!is_variable_name("sk-abc"));
        assert!(!is_variable_name(""));
    }
}
