//! The integration suite, one test binary: the HTTP API, authentication, the live catalog, the
//! client, the command line, the container image's command, the OpenAPI document, conformance
//! with nagents (recorded, and live where nagents is installed), the security of discovery, and the
//! agentskills.io rules of `check --spec` (with skills-ref's recorded findings), and MCP through a real
//! client.
//! What the tests share is in `support`.

mod api;
mod auth;
mod churn;
mod cli;
mod client;
mod conformance;
mod files;
mod fleet;
mod git;
mod hostile;
mod image;
mod live;
mod mcp;
mod openapi;
mod operators;
mod pages;
mod pins;
mod reference;
mod repository;
mod search;
mod security;
mod spec;
mod support;
mod usage;
mod versions;
mod wellknown;
