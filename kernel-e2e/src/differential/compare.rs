//! Two backends' answers for one policy, compared path by path, and the report a reader gets.

use std::fmt;

use super::host::Change;

/// A path the two backends answered differently for (or one of them not at all).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Difference {
    pub label: String,
    /// The reference backend's answer (`t=… r=… w=… x=…`), or `None` when it printed none.
    pub reference: Option<String>,
    pub candidate: Option<String>,
}

/// The paths in `labels` whose answers differ between `reference` and `candidate` (each as
/// [`super::script::answers`] read it); a label printed twice or not asked for is a difference
/// too, so a script that went astray cannot pass.
pub fn differences(
    labels: &[String],
    reference: &[(String, String)],
    candidate: &[(String, String)],
) -> Vec<Difference> {
    let answer = |answers: &[(String, String)], label: &str| {
        let mut found = answers.iter().filter(|(l, _)| l == label).map(|(_, a)| a);
        match (found.next(), found.next()) {
            (Some(one), None) => Some(one.clone()),
            (Some(one), Some(_)) => Some(format!("{one} (and printed again)")),
            (None, _) => None,
        }
    };
    let mut out: Vec<Difference> = labels
        .iter()
        .filter_map(|label| {
            let (r, c) = (answer(reference, label), answer(candidate, label));
            (r != c || r.is_none()).then(|| Difference {
                label: label.clone(),
                reference: r,
                candidate: c,
            })
        })
        .collect();
    for (label, _) in reference.iter().chain(candidate) {
        if !labels.contains(label) && !out.iter().any(|d| &d.label == label) {
            out.push(Difference {
                label: label.clone(),
                reference: answer(reference, label),
                candidate: answer(candidate, label),
            });
        }
    }
    out
}

/// One policy compared, for one user.
#[derive(Debug, Clone)]
pub struct Outcome {
    /// `NN name (mode)`.
    pub policy: String,
    pub user: String,
    pub reference: &'static str,
    pub candidate: &'static str,
    pub paths: usize,
    pub differences: Vec<Difference>,
    /// What each backend's run changed on the host that the policy keeps.
    pub reference_changes: Vec<Change>,
    pub candidate_changes: Vec<Change>,
    /// What each run saw (its `TMPDIR`, working directory), then its command line.
    pub reference_run: Vec<String>,
    pub candidate_run: Vec<String>,
}

impl Outcome {
    /// The backends answered alike for every path and neither changed a canary.
    pub fn agrees(&self) -> bool {
        self.differences.is_empty()
            && self.reference_changes.is_empty()
            && self.candidate_changes.is_empty()
    }
}

/// What every answer's fields mean, printed above a difference.
const LEGEND: &str = "t: d directory, f file, c device, o other, - nothing; r, w: test -r, \
                      test -w; x: a real read (1 something, e nothing, 0 refused, - not tried) \
                      then a real write (1 done, 0 refused, k left behind, - not tried)";

impl fmt::Display for Outcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (reference, candidate) = (self.reference, self.candidate);
        if self.agrees() {
            return write!(
                f,
                "same    {} as {}: {} paths, {reference} and {candidate} answer alike",
                self.policy, self.user, self.paths
            );
        }
        writeln!(
            f,
            "DIFFER  {} as {}: {} of {} paths answer differently",
            self.policy,
            self.user,
            self.differences.len(),
            self.paths
        )?;
        writeln!(f, "    ({LEGEND})")?;
        let width = self
            .differences
            .iter()
            .map(|d| d.label.chars().count())
            .max()
            .unwrap_or(0);
        let shown = |a: &Option<String>| a.clone().unwrap_or_else(|| "(no answer)".into());
        for d in &self.differences {
            writeln!(
                f,
                "    {:<width$}  {reference}: {:<22}  {candidate}: {}",
                d.label,
                shown(&d.reference),
                shown(&d.candidate)
            )?;
        }
        for (backend, changes) in [
            (reference, &self.reference_changes),
            (candidate, &self.candidate_changes),
        ] {
            for change in changes {
                writeln!(f, "    on the host after the {backend} run: {change}")?;
            }
        }
        for (backend, run) in [
            (reference, &self.reference_run),
            (candidate, &self.candidate_run),
        ] {
            for line in run {
                writeln!(f, "    {backend}: {line}")?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answers(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(l, a)| ((*l).to_owned(), (*a).to_owned()))
            .collect()
    }

    #[test]
    fn a_different_missing_repeated_or_unasked_answer_is_a_difference() {
        let labels: Vec<String> = ["a", "b", "c", "d"].map(String::from).to_vec();
        let reference = answers(&[("a", "t=f r=1"), ("b", "t=f r=1"), ("c", "t=d"), ("d", "x")]);
        let candidate = answers(&[("a", "t=f r=1"), ("b", "t=f r=0"), ("d", "x"), ("d", "x")]);
        let found: Vec<String> = differences(&labels, &reference, &candidate)
            .into_iter()
            .map(|d| d.label)
            .collect();
        assert_eq!(found, ["b", "c", "d"]);
        let extra = answers(&[("a", "t=f r=1"), ("e", "t=-")]);
        let found = differences(&labels[..1], &extra, &answers(&[("a", "t=f r=1")]));
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].label, "e");
        // The control: the same answers are no difference.
        assert!(differences(&labels, &reference, &reference.clone()).is_empty());
    }
}
