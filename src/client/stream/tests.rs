use super::*;

/// reqwest, the transport of `https://` targets, follows no redirect of
/// a generation request (it followed a same-origin 307, a second round
/// trip in the figures; a 302 would have turned the POST into a GET):
/// the request fails saying where it points, as over the raw transport.
/// Plain HTTP here, the raw transport set aside: the policy is the
/// client's, not TLS's.
#[tokio::test]
async fn a_generation_request_through_reqwest_follows_no_redirect() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let server = tokio::spawn(async move {
        let mut asked = Vec::new();
        // The request may be slow to come on a loaded machine; a
        // followed redirect would come at once after it.
        let mut wait = Duration::from_secs(30);
        while let Ok(Ok((mut sock, _))) = tokio::time::timeout(wait, listener.accept()).await {
            wait = Duration::from_secs(1);
            let mut head = vec![0u8; 64 * 1024];
            let n = sock.read(&mut head).await.unwrap_or(0);
            let head = String::from_utf8_lossy(&head[..n]).into_owned();
            asked.push(head.lines().next().unwrap_or("").to_owned());
            let answer = if head.starts_with("POST /v1/chat/completions") {
                "HTTP/1.1 307 Temporary Redirect\r\nLocation: /elsewhere\r\nContent-Length: 0\r\nConnection: close\r\n\r\n".to_owned()
            } else {
                let body = "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"4\"},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n";
                format!(
                    "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                    body.len()
                )
            };
            let _ = sock.write_all(answer.as_bytes()).await;
        }
        asked
    });
    let timeouts = Timeouts {
        connect: Duration::from_secs(2),
        first_token: Duration::from_secs(5),
        idle: Duration::from_secs(5),
        total: Duration::from_secs(10),
    };
    let mut client =
        Client::new(&base, crate::suite::Api::OpenAiChat, "m", None, timeouts).unwrap();
    client.raw = None;
    let req = CallRequest {
        input: crate::suite::Input::prompt(None, "What is 2+2?".into()),
        sampling: crate::suite::Sampling::default(),
        ignore_eos: false,
    };
    let e = client.complete(&req).await.unwrap_err();
    assert_eq!(e.kind, ErrorKind::Http(307), "{e}");
    assert!(
        e.detail
            .contains("the server redirects this request to \"/elsewhere\" (Location)"),
        "{e}"
    );
    let asked = server.await.unwrap();
    assert_eq!(asked, ["POST /v1/chat/completions HTTP/1.1"]);
}

/// A request through an adapter names it as the server reads it: SGLang's
/// `lora_path`, vLLM's `model`, both where the server is not known; and
/// SGLang's `/generate` (its scoring too) always by `lora_path`.
#[test]
fn an_adapter_is_named_as_the_server_reads_it() {
    use crate::client::api::AdapterField;
    use crate::suite::Api;
    let client = |api, field| {
        Client::new("http://127.0.0.1:9", api, "base", None, Timeouts::default())
            .unwrap()
            .with_adapter_field(field)
    };
    let req = CallRequest {
        input: crate::suite::Input::prompt(None, "hi".into()),
        sampling: crate::suite::Sampling {
            adapter: Some("sql".into()),
            ..crate::suite::Sampling::default()
        },
        ignore_eos: false,
    };
    let named = |body: &serde_json::Value| (body["model"].clone(), body["lora_path"].clone());
    let null = serde_json::Value::Null;
    for (field, want) in [
        (AdapterField::LoraPath, ("base".into(), "sql".into())),
        (AdapterField::Model, ("sql".into(), null.clone())),
        (AdapterField::Both, ("sql".into(), "sql".into())),
    ] {
        let c = client(Api::OpenAiChat, field);
        assert_eq!(named(&c.body(&req)), want, "{field:?}");
    }
    let generate = client(Api::SglangGenerate, AdapterField::Model);
    assert_eq!(generate.body(&req)["lora_path"], "sql");
    let (_, scored) = generate
        .score_request(Api::SglangGenerate, "text", Some("sql"))
        .unwrap();
    assert_eq!(scored["lora_path"], "sql");
    let (_, scored) = client(Api::OpenAiCompletions, AdapterField::Model)
        .score_request(Api::OpenAiCompletions, "text", Some("sql"))
        .unwrap();
    assert_eq!(named(&scored), ("sql".into(), null));
    let base = CallRequest {
        sampling: crate::suite::Sampling::default(),
        ..req
    };
    assert_eq!(
        named(&client(Api::OpenAiChat, AdapterField::Both).body(&base)),
        ("base".into(), serde_json::Value::Null)
    );
}
