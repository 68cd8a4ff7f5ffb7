//! Every allocation the agent holds (live or restored), in the order Nomad's list pages
//! them: create index, then ID. A page of `/v1/allocations` is a range of this index, not
//! a visit and sort of every allocation (which, under load, waited on each one's lock).

use std::collections::BTreeMap;
use std::sync::RwLock;

use crate::structs::Allocation;

/// An allocation's place in the list: (create index, ID).
pub type ListKey = (u64, String);

/// The index: list key → namespace (the only filter a page applies besides its range).
#[derive(Default)]
pub struct AllocOrder(RwLock<BTreeMap<ListKey, String>>);

impl AllocOrder {
    /// An allocation entered the agent's tables (its create index never changes).
    pub fn insert(&self, a: &Allocation) {
        self.0
            .write()
            .unwrap()
            .insert((a.create_index, a.id.clone()), a.namespace.clone());
    }

    /// An allocation left them.
    pub fn remove(&self, create_index: u64, id: &str) {
        self.0
            .write()
            .unwrap()
            .remove(&(create_index, id.to_string()));
    }

    /// The keys from `from` on whose namespace `keep` accepts, at most `limit`, and the key
    /// of the next one when more are left.
    pub fn page(
        &self,
        from: Option<&ListKey>,
        keep: impl Fn(&str) -> bool,
        limit: Option<usize>,
    ) -> (Vec<ListKey>, Option<ListKey>) {
        let index = self.0.read().unwrap();
        let range = match from {
            Some(k) => index.range(k.clone()..),
            None => index.range(..),
        };
        let mut out = Vec::new();
        for (k, namespace) in range {
            if !keep(namespace) {
                continue;
            }
            if limit.is_some_and(|n| out.len() >= n) {
                return (out, Some(k.clone()));
            }
            out.push(k.clone());
        }
        (out, None)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_page_is_a_range_in_create_index_then_id_order_filtered_by_namespace() {
        let o = AllocOrder::default();
        let put = |index: u64, id: &str, ns: &str| {
            o.0.write()
                .unwrap()
                .insert((index, id.to_string()), ns.to_string());
        };
        put(7, "b", "default");
        put(7, "a", "default");
        put(3, "z", "other");
        put(9, "c", "default");
        let all = |_: &str| true;
        let (page, next) = o.page(None, all, Some(2));
        assert_eq!(page, [(3, "z".into()), (7, "a".into())]);
        assert_eq!(next, Some((7, "b".into())));
        let (page, next) = o.page(next.as_ref(), all, Some(2));
        assert_eq!(page, [(7, "b".into()), (9, "c".into())]);
        assert_eq!(next, None);
        let (page, _) = o.page(None, |ns| ns == "default", None);
        assert_eq!(page.len(), 3);
        o.remove(7, "a");
        assert_eq!(o.page(None, all, None).0.len(), 3);
    }
}
