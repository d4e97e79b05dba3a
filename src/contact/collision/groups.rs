//! Collision groups: which bodies a cloth meets, in the manner of rapier's `InteractionGroups`.
//!
//! A cloth ([`crate::ContactSettings::groups`]) and a body ([`crate::ColliderSet::set_groups`])
//! each belong to some of 32 groups (`memberships`) and meet the groups of their `filter`. A
//! cloth meets a body when each is in a group the other's filter names:
//! `cloth.memberships & body.filter != 0 && body.memberships & cloth.filter != 0`. Both default
//! to every group, so that everything meets everything until a game says otherwise.
//!
//! In files (scenarios, configs) groups are lists of group numbers 1 to 32, as an artist would
//! name layers: `groups: (memberships: [2], filter: [1, 2])`; a number outside 1..=32 is refused
//! ([`GroupError`]). An empty `memberships` or `filter` meets nothing (contact with every body
//! off without turning contact off).

use serde::{Deserialize, Serialize};
use thiserror::Error;

/// Group membership and filter bits of a cloth or a body (bit `k - 1` is group `k`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(try_from = "GroupLists", into = "GroupLists")]
pub struct CollisionGroups {
    /// The groups this cloth or body belongs to. Default: all 32.
    pub memberships: u32,
    /// The groups it meets. Default: all 32.
    pub filter: u32,
}

impl Default for CollisionGroups {
    fn default() -> Self {
        Self::ALL
    }
}

impl CollisionGroups {
    /// In every group, meeting every group (the default).
    pub const ALL: Self = Self {
        memberships: u32::MAX,
        filter: u32::MAX,
    };
    /// In no group, meeting none.
    pub const NONE: Self = Self {
        memberships: 0,
        filter: 0,
    };

    /// Groups from bit masks (bit `k - 1` is group `k`).
    pub const fn new(memberships: u32, filter: u32) -> Self {
        Self {
            memberships,
            filter,
        }
    }

    /// Groups from lists of group numbers (1 to 32), as files give them.
    pub fn from_lists(memberships: &[u32], filter: &[u32]) -> Result<Self, GroupError> {
        Ok(Self {
            memberships: mask("memberships", memberships)?,
            filter: mask("filter", filter)?,
        })
    }

    /// The single group `k` (1 to 32), meeting every group.
    pub fn member_of(k: u32) -> Result<Self, GroupError> {
        Ok(Self {
            memberships: mask("memberships", &[k])?,
            filter: u32::MAX,
        })
    }

    /// Whether `self` and `other` meet: each is in a group the other's filter names.
    pub const fn meets(self, other: Self) -> bool {
        self.memberships & other.filter != 0 && other.memberships & self.filter != 0
    }
}

/// A group number outside 1..=32.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("collision group {group} in `{field}` does not exist (groups are numbered 1 to 32)")]
pub struct GroupError {
    /// `memberships` or `filter`.
    pub field: &'static str,
    /// The number given.
    pub group: u32,
}

fn mask(field: &'static str, groups: &[u32]) -> Result<u32, GroupError> {
    groups.iter().try_fold(0u32, |m, &group| {
        if (1..=32).contains(&group) {
            Ok(m | 1 << (group - 1))
        } else {
            Err(GroupError { field, group })
        }
    })
}

/// The file form: lists of group numbers.
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct GroupLists {
    #[serde(default = "all")]
    memberships: Vec<u32>,
    #[serde(default = "all")]
    filter: Vec<u32>,
}

fn all() -> Vec<u32> {
    (1..=32).collect()
}

impl TryFrom<GroupLists> for CollisionGroups {
    type Error = GroupError;
    fn try_from(l: GroupLists) -> Result<Self, GroupError> {
        Self::from_lists(&l.memberships, &l.filter)
    }
}

impl From<CollisionGroups> for GroupLists {
    fn from(g: CollisionGroups) -> Self {
        let list = |m: u32| (1..=32).filter(|k| m & 1 << (k - 1) != 0).collect();
        Self {
            memberships: list(g.memberships),
            filter: list(g.filter),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Meeting needs both directions: a body in group 2 that meets only group 2 does not meet
    /// a cloth of group 1, even if the cloth's filter names group 2.
    #[test]
    fn groups_meet_only_when_each_passes_the_others_filter() {
        let cloth = CollisionGroups::from_lists(&[1], &[1, 2]).unwrap();
        let own = CollisionGroups::from_lists(&[2], &[1]).unwrap();
        let other = CollisionGroups::from_lists(&[2], &[2]).unwrap();
        assert!(cloth.meets(own) && own.meets(cloth));
        assert!(!cloth.meets(other) && !other.meets(cloth));
        assert!(CollisionGroups::ALL.meets(cloth));
        assert!(!CollisionGroups::NONE.meets(CollisionGroups::ALL));
    }

    /// Group 0 and group 33 are refused, naming the field and the number.
    #[test]
    fn a_group_outside_one_to_thirty_two_is_refused() {
        assert_eq!(
            CollisionGroups::from_lists(&[0], &[1]),
            Err(GroupError {
                field: "memberships",
                group: 0
            })
        );
        assert_eq!(
            CollisionGroups::from_lists(&[32], &[33]),
            Err(GroupError {
                field: "filter",
                group: 33
            })
        );
        assert_eq!(
            CollisionGroups::from_lists(&[32], &[1])
                .unwrap()
                .memberships,
            1 << 31
        );
    }

    /// The file form round-trips through RON, and a missing list means every group.
    #[test]
    fn groups_read_from_ron_as_lists_of_numbers() {
        let g: CollisionGroups = ron::from_str("(memberships: [3], filter: [1, 3])").unwrap();
        assert_eq!(g, CollisionGroups::new(0b100, 0b101));
        let text = ron::to_string(&g).unwrap();
        assert_eq!(ron::from_str::<CollisionGroups>(&text).unwrap(), g);
        let open: CollisionGroups = ron::from_str("(memberships: [3])").unwrap();
        assert_eq!(open.filter, u32::MAX);
        let bad = ron::from_str::<CollisionGroups>("(memberships: [40])").unwrap_err();
        assert!(bad.to_string().contains("40"), "{bad}");
    }
}
