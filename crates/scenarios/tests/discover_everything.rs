//! Discovery on the reference server, `@modelcontextprotocol/server-everything` (installed on
//! first use into the test cache): tools, resources with sampled contents, resource templates
//! and prompts all reach the teacher's prompt.

use std::time::Duration;

use ta_mcp::{ClientOptions, McpClient, ServerSpec};
use ta_scenarios::prompt::{DEFAULT_TEMPLATE, render};
use ta_scenarios::{DiscoverOptions, Surface};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn discovery_covers_resources_templates_and_prompts() {
    let Some(program) = ta_testkit::SERVER_EVERYTHING.path("discovery_covers_resources_templates_and_prompts") else { return };
    let opts = ClientOptions { call_timeout: Duration::from_secs(30), connect_timeout: Duration::from_secs(90), ..Default::default() };
    let client = McpClient::connect(ServerSpec::parse(&program.display().to_string()).unwrap(), opts).await.unwrap();
    let discovery = client.discover().await.unwrap();
    let surface = Surface::gather(&client, &discovery, &DiscoverOptions { sample_resources: 2, sample_chars: 200, max_resources: 10 }).await;
    client.close().await;

    assert!(surface.tools.iter().any(|t| t.name == "echo" && t.input_schema.contains("\"message\"")), "{:?}", surface.tools);
    assert!(!surface.resources.is_empty() && surface.resources.len() <= 10);
    let sampled: Vec<_> = surface.resources.iter().filter(|r| r.sample.is_some()).collect();
    assert_eq!(sampled.len(), 2, "the first two resources are read: {:?}", surface.resources);
    assert!(sampled.iter().all(|r| !r.sample.as_deref().unwrap().is_empty()));
    assert!(!surface.resource_templates.is_empty(), "server-everything offers resource templates");
    assert!(surface.resource_templates.iter().all(|t| t.uri_template.contains('{')), "{:?}", surface.resource_templates);
    assert!(!surface.prompts.is_empty(), "server-everything offers prompts");
    assert!(surface.prompts.iter().any(|p| !p.arguments.is_empty()), "some prompts take arguments: {:?}", surface.prompts);

    let prompt = render(DEFAULT_TEMPLATE, "default", &surface, 10, 0, &[]).unwrap();
    for needle in [&surface.resources[0].uri, &surface.resource_templates[0].uri_template, &surface.prompts[0].name] {
        assert!(prompt.user.contains(needle.as_str()), "{needle} not in the prompt:\n{}", prompt.user);
    }
}
