//! Marketplace-area events: indexes (`open-design-marketplace.json`, the anthropic marketplace
//! shape) added, refreshed, re-trusted and removed. Stream: `marketplace:<id>`.

use crate::vocab::Trust;
use serde::{Deserialize, Serialize};

/// A marketplace index was added.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MarketplaceAdded {
    pub id: String,
    /// Where the index is read from (a path or URL).
    pub url: String,
    /// official | trusted | restricted
    pub trust: Trust,
    /// The index as compact JSON.
    pub manifest_json: String,
}

/// A marketplace index was fetched again and had changed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MarketplaceRefreshed {
    pub id: String,
    pub manifest_json: String,
}

/// A marketplace's trust tier was set.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MarketplaceTrusted {
    pub id: String,
    pub trust: Trust,
}

/// A marketplace was removed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MarketplaceRemoved {
    pub id: String,
}
