//! One cancellation token per agent, linked to its parent's: cancelling a token cancels every
//! token below it, and a token made under a cancelled one is born cancelled, so no child can
//! slip past a cancellation that raced its start.
//!
//! A token hands out [`crate::cancel::Cancel`] signals, the type the model loop, the tools and
//! the permission waits already take, so a child's tools stop the way a cancelled turn's do.

use std::sync::{Arc, Mutex, MutexGuard, PoisonError, Weak};

use crate::cancel::{self, Cancel, Canceller};

/// A node of the cancellation tree: cheap to clone; every clone is the same node.
#[derive(Debug, Clone)]
pub struct CancelToken(Arc<Node>);

#[derive(Debug)]
struct Node {
    canceller: Canceller,
    signal: Cancel,
    below: Mutex<Below>,
}

/// What a node knows of the nodes made under it.
#[derive(Debug, Default)]
struct Below {
    /// Set, under this lock, before the children are cancelled: a child made after it is born
    /// cancelled instead of being added.
    cancelled: bool,
    children: Vec<Weak<Node>>,
}

fn lock(below: &Mutex<Below>) -> MutexGuard<'_, Below> {
    below.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Default for CancelToken {
    fn default() -> Self {
        CancelToken::new()
    }
}

impl CancelToken {
    /// A root token, not cancelled.
    pub fn new() -> CancelToken {
        let (canceller, signal) = cancel::pair();
        CancelToken(Arc::new(Node {
            canceller,
            signal,
            below: Mutex::new(Below::default()),
        }))
    }

    /// A token under this one: cancelled with it, or already cancelled if this one is.
    pub fn child(&self) -> CancelToken {
        let child = CancelToken::new();
        let born_cancelled = {
            let mut below = lock(&self.0.below);
            if below.cancelled {
                true
            } else {
                below.children.retain(|c| c.strong_count() > 0);
                below.children.push(Arc::downgrade(&child.0));
                false
            }
        };
        if born_cancelled {
            child.cancel();
        }
        child
    }

    /// Cancels this token and every token below it, now and made later. Idempotent; safe from
    /// any thread and from inside anything the cancellation wakes.
    pub fn cancel(&self) {
        let mut stack = vec![Arc::clone(&self.0)];
        while let Some(node) = stack.pop() {
            let children = {
                let mut below = lock(&node.below);
                if below.cancelled {
                    continue;
                }
                below.cancelled = true;
                std::mem::take(&mut below.children)
            };
            node.canceller.cancel();
            stack.extend(children.iter().filter_map(Weak::upgrade));
        }
    }

    pub fn is_cancelled(&self) -> bool {
        self.0.signal.is_cancelled()
    }

    /// Resolves once this token is cancelled.
    pub async fn cancelled(&self) {
        // The node holds its canceller, so while `self` lives the signal can still fire.
        self.0.signal.cancelled().await;
    }

    /// A signal for one more holder (a tool call, a model request, a permission wait).
    pub fn signal(&self) -> Cancel {
        self.0.canceller.subscribe()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cancelling_a_token_cancels_its_subtree_but_not_its_parent() {
        let root = CancelToken::new();
        let child = root.child();
        let grandchild = child.child();
        let sibling = root.child();
        child.cancel();
        assert!(child.is_cancelled() && grandchild.is_cancelled());
        assert!(!root.is_cancelled() && !sibling.is_cancelled());
    }

    #[test]
    fn a_token_made_under_a_cancelled_one_is_born_cancelled() {
        let root = CancelToken::new();
        root.cancel();
        root.cancel();
        let late = root.child();
        assert!(late.is_cancelled());
        assert!(late.child().is_cancelled());
        assert!(late.signal().is_cancelled());
    }

    #[tokio::test]
    async fn signals_handed_out_before_the_cancel_fire() {
        let root = CancelToken::new();
        let child = root.child();
        let signal = child.signal();
        let waiter = tokio::spawn(async move { signal.cancelled().await });
        let token_waiter = {
            let child = child.clone();
            tokio::spawn(async move { child.cancelled().await })
        };
        root.cancel();
        waiter.await.expect("the signal fired");
        token_waiter.await.expect("the token fired");
    }

    #[test]
    fn dropped_children_are_not_kept() {
        let root = CancelToken::new();
        for _ in 0..100 {
            drop(root.child());
        }
        let kept = root.child();
        assert_eq!(lock(&root.0.below).children.len(), 1);
        root.cancel();
        assert!(kept.is_cancelled());
    }
}
