//! A session's model: the `model/selected` event, its fold and its one write path.
//!
//! The model a session's next request goes to is [`ModelNames::effective`]: the last
//! `model/selected` event of the session, if it names a model that is still configured, else
//! the configured default. As with the other knobs nothing else is kept: a restarted agentd
//! finds the same model by replaying the log. A name the configuration no longer has (a
//! `[models.NAME]` table removed since) falls back to the default; [`ModelNames::dropped`] says
//! which name that was, for the one line agentd prints when it loads such a session.
//! [`ModelNames::set`] is the only code that appends the event.

use crate::session::{Event, LogError, Record, SessionLog};

/// The names of the configured models, the default first (see
/// [`crate::config::Effective::models_in_order`]): plain names, so the knob sits below the
/// configuration and the providers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelNames {
    /// Never empty: the default, then the others.
    names: Vec<String>,
}

impl ModelNames {
    /// `default` and then `others`, in the order given.
    pub fn new(default: String, others: impl IntoIterator<Item = String>) -> ModelNames {
        let mut names = vec![default];
        names.extend(others);
        ModelNames { names }
    }

    /// The default model's name.
    pub fn default_name(&self) -> &str {
        self.names.first().map_or("", String::as_str)
    }

    /// Every name, the default first.
    pub fn names(&self) -> &[String] {
        &self.names
    }

    /// Whether `name` is a configured model.
    pub fn contains(&self, name: &str) -> bool {
        self.names.iter().any(|n| n == name)
    }

    /// The last model `records` selected, configured or not.
    fn last_selected(records: &[Record]) -> Option<&str> {
        records.iter().rev().find_map(|r| match &r.event {
            Event::ModelSelected { name } => Some(name.as_str()),
            _ => None,
        })
    }

    /// The session's model: the last `model/selected` in `records` if it is configured, else
    /// the default.
    pub fn effective(&self, records: &[Record]) -> &str {
        let last = Self::last_selected(records);
        self.names
            .iter()
            .find(|n| last == Some(n.as_str()))
            .map_or(self.default_name(), String::as_str)
    }

    /// The model the session last selected when the configuration no longer has it (the
    /// session then uses the default).
    pub fn dropped(&self, records: &[Record]) -> Option<String> {
        Self::last_selected(records)
            .filter(|name| !self.contains(name))
            .map(str::to_owned)
    }

    /// Switches the session to `name`: appends `model/selected` unless `name` already is the
    /// effective model (a no-op records nothing). Returns whether it appended. The caller has
    /// checked that `name` is configured.
    pub fn set(&self, log: &dyn SessionLog, name: &str) -> Result<bool, LogError> {
        if self.effective(&log.records()) == name {
            return Ok(false);
        }
        log.append(
            Event::ModelSelected {
                name: name.to_owned(),
            },
            true,
        )?;
        Ok(true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::MemoryLog;

    fn names() -> ModelNames {
        ModelNames::new("default".into(), ["fast".into(), "slow".into()])
    }

    fn selected(name: &str) -> Event {
        Event::ModelSelected {
            name: name.to_owned(),
        }
    }

    #[test]
    fn the_effective_model_is_the_last_selection_or_the_default() {
        let log = MemoryLog::new();
        let names = names();
        assert_eq!(names.effective(&log.records()), "default");
        log.push(selected("fast"));
        log.push(Event::TurnStarted { turn: 1 });
        assert_eq!(names.effective(&log.records()), "fast");
        log.push(selected("slow"));
        assert_eq!(names.effective(&log.records()), "slow");
        assert_eq!(names.dropped(&log.records()), None);
    }

    #[test]
    fn a_selection_no_longer_configured_falls_back_to_the_default_and_says_which() {
        let log = MemoryLog::new();
        log.push(selected("fast"));
        log.push(selected("gone"));
        let names = names();
        assert_eq!(
            names.effective(&log.records()),
            "default",
            "not the earlier fast: the last choice was gone"
        );
        assert_eq!(names.dropped(&log.records()).as_deref(), Some("gone"));
        // Selecting the default then records nothing: it already is the effective model.
        assert!(!names.set(&log, "default").expect("set"));
        assert!(names.set(&log, "fast").expect("set"));
        assert_eq!(names.dropped(&log.records()), None);
    }

    #[test]
    fn the_write_path_appends_a_selection_and_records_nothing_for_a_no_op() {
        let log = MemoryLog::new();
        let names = names();
        assert!(!names.set(&log, "default").expect("set"));
        assert_eq!(log.records().len(), 1, "only the header");
        assert!(names.set(&log, "fast").expect("set"));
        assert!(!names.set(&log, "fast").expect("set"));
        assert!(names.set(&log, "default").expect("set"));
        assert_eq!(log.events()[1..], [selected("fast"), selected("default")]);
    }

    #[test]
    fn the_event_is_spelt_model_selected_with_the_name() {
        let json = serde_json::to_value(selected("fast")).expect("json");
        assert_eq!(
            json,
            serde_json::json!({"type": "model/selected", "name": "fast"})
        );
        assert_eq!(
            serde_json::from_value::<Event>(json).expect("parse"),
            selected("fast")
        );
    }
}
