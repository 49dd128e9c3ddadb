//! A skillcat catalog over HTTP, as a `skillcat-core` [`SkillDiscoverer`](skillcat_core::SkillDiscoverer).
