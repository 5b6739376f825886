//! Spaces, teams and role bindings: who may see and do what, across a space tree with
//! inheritance, for users bound directly, through a team, and not at all. Something the
//! caller cannot see is "not found"; something it sees but may not change is "forbidden".

use serde_json::{Value, json};
use terraplane_client::{Client, ClientError};

use crate::both_backends;
use crate::harness::*;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Want {
    Ok,
    Forbidden,
    NotFound,
}

fn outcome<T: std::fmt::Debug>(r: &Result<T, ClientError>) -> Want {
    match r {
        Ok(_) => Want::Ok,
        Err(e) if e.code() == Some("forbidden") => Want::Forbidden,
        Err(e) if e.is_not_found() => Want::NotFound,
        Err(e) => panic!("unexpected error {e:?}"),
    }
}

async fn gql(c: &Client, q: &str, vars: Value) -> Result<Value, ClientError> {
    c.graphql::<Value>(q, vars).await
}

async fn login(app: &TestApp, email: &str) -> Client {
    let r = app
        .client
        .with_token(None)
        .login(email, "a-long-password-1", None)
        .await
        .unwrap();
    app.client.with_token(Some(r.token))
}

async fn setup(app: &TestApp) -> Vec<(&'static str, Client)> {
    let c = &app.client;
    for (slug, parent, inherit) in [
        ("dev", "root", false),
        ("dev-app", "dev", true),
        ("prod", "root", false),
    ] {
        gql(
            c,
            "mutation($s: String!, $p: String, $i: Boolean!) { spaceCreate(slug: $s, parent: $p, inherit: $i) { id } }",
            json!({"s": slug, "p": parent, "i": inherit}),
        )
        .await
        .unwrap();
    }
    for user in ["alice", "bob", "carol", "dave", "eve"] {
        gql(
            c,
            "mutation($e: String!) { userCreate(email: $e, password: \"a-long-password-1\") { id } }",
            json!({"e": format!("{user}@example.com")}),
        )
        .await
        .unwrap();
    }
    gql(c, "mutation { teamCreate(slug: \"infra-leads\") { id } }", json!({}))
        .await
        .unwrap();
    let t = gql(
        c,
        "mutation { teamAddMember(team: \"infra-leads\", email: \"eve@example.com\") { members } }",
        json!({}),
    )
    .await
    .unwrap();
    assert_eq!(t["teamAddMember"]["members"], json!(["eve@example.com"]));
    for (space, subject, role) in [
        ("dev", json!({"user": "alice@example.com"}), "reader"),
        ("dev", json!({"user": "bob@example.com"}), "writer"),
        ("dev", json!({"user": "carol@example.com"}), "admin"),
        ("prod", json!({"team": "infra-leads"}), "writer"),
    ] {
        gql(c, "mutation($s: ID!, $sub: SubjectInput!, $r: String!) { roleGrant(space: $s, subject: $sub, role: $r) { role } }", json!({"s": space, "sub": subject, "r": role}))
            .await
            .unwrap();
    }
    for (slug, space) in [
        ("s-dev", "dev"),
        ("s-app", "dev-app"),
        ("s-prod", "prod"),
        ("s-root", "root"),
    ] {
        let input = terraplane_client::StackCreateInput {
            slug: Some(slug.into()),
            name: slug.into(),
            repository: "file:///nowhere".into(),
            ..Default::default()
        };
        let mut v = serde_json::to_value(&input).unwrap();
        v["space"] = json!(space);
        gql(
            c,
            "mutation($i: StackCreateInput!) { stackCreate(input: $i) { id } }",
            json!({"i": v}),
        )
        .await
        .unwrap();
    }
    let mut out = vec![("owner", app.client.clone())];
    for u in ["alice", "bob", "carol", "dave", "eve"] {
        out.push((u, login(app, &format!("{u}@example.com")).await));
    }
    out
}

async fn role_matrix(app: TestApp) {
    let who = setup(&app).await;
    use Want::*;
    // (stack, [owner, alice reader@dev, bob writer@dev, carol admin@dev, dave none, eve team writer@prod])
    let see = [
        ("s-dev", [Ok, Ok, Ok, Ok, NotFound, NotFound]),
        ("s-app", [Ok, Ok, Ok, Ok, NotFound, NotFound]), // dev-app inherits dev
        ("s-prod", [Ok, NotFound, NotFound, NotFound, NotFound, Ok]),
        ("s-root", [Ok, NotFound, NotFound, NotFound, NotFound, NotFound]),
    ];
    for (stack, wants) in see {
        for ((name, c), want) in who.iter().zip(wants) {
            let r = c.stack(stack).await;
            let got = match &r {
                Result::Ok(Some(_)) => Ok,
                Result::Ok(None) => NotFound,
                Err(_) => outcome(&r),
            };
            assert_eq!(got, want, "{name} reading {stack}");
            // Listing agrees with reading.
            let listed = c.stacks().await.unwrap().iter().any(|s| s.id == stack);
            assert_eq!(listed, want == Ok, "{name} listing {stack}");
        }
    }
    // Triggering needs writer; locking too; deleting needs admin; seeing nothing is 404.
    let write = [
        ("s-dev", [Ok, Forbidden, Ok, Ok, NotFound, NotFound]),
        ("s-prod", [Ok, NotFound, NotFound, NotFound, NotFound, Ok]),
    ];
    for (stack, wants) in write {
        for ((name, c), want) in who.iter().zip(wants) {
            let r = c.run_trigger(stack, true).await;
            assert_eq!(outcome(&r), want, "{name} triggering on {stack}");
            let r = c.stack_lock(stack, None).await;
            assert_eq!(outcome(&r), want, "{name} locking {stack}");
            if r.is_ok() {
                c.stack_unlock(stack, false).await.unwrap();
            }
        }
    }
    // Runs follow their stack: alice reads s-dev's runs but can't cancel them.
    let run = who[0].1.run_trigger("s-dev", false).await.unwrap();
    let wants = [Ok, Forbidden, Ok, Ok, NotFound, NotFound];
    for ((name, c), want) in who.iter().zip(wants) {
        let seen = c.run(&run.id).await.unwrap().is_some();
        assert_eq!(seen, want != NotFound, "{name} reading a run of s-dev");
        let r = c.run_discard(&run.id).await;
        let got = match &r {
            Err(e) if e.code() == Some("invalid_run_state") => Ok,
            _ => outcome(&r),
        };
        assert_eq!(got, want, "{name} discarding a run of s-dev");
    }
    // Admin-level: creating stacks and spaces in dev, granting roles there.
    let wants = [Ok, Forbidden, Forbidden, Ok, NotFound, NotFound];
    for (i, ((name, c), want)) in who.iter().zip(wants).enumerate() {
        let input = terraplane_client::StackCreateInput {
            slug: Some(format!("new-{i}")),
            name: "n".into(),
            repository: "file:///x".into(),
            ..Default::default()
        };
        let mut v = serde_json::to_value(&input).unwrap();
        v["space"] = json!("dev");
        let r = gql(
            c,
            "mutation($i: StackCreateInput!) { stackCreate(input: $i) { id } }",
            json!({"i": v}),
        )
        .await;
        assert_eq!(outcome(&r), want, "{name} creating a stack in dev");
        let r = gql(
            c,
            "mutation($s: String!) { spaceCreate(slug: $s, parent: \"dev\") { id } }",
            json!({"s": format!("sub-{i}")}),
        )
        .await;
        assert_eq!(outcome(&r), want, "{name} creating a space under dev");
        let r = gql(
            c,
            "mutation { roleGrant(space: \"dev\", subject: {user: \"dave@example.com\"}, role: \"reader\") { role } }",
            json!({}),
        )
        .await;
        assert_eq!(outcome(&r), want, "{name} granting on dev");
        if r.is_ok() {
            gql(
                c,
                "mutation { roleRevoke(space: \"dev\", subject: {user: \"dave@example.com\"}) }",
                json!({}),
            )
            .await
            .unwrap();
        }
        let r = c.stack_delete(&format!("new-{i}")).await;
        let got = if want == Ok { outcome(&r) } else { want };
        assert_eq!(got, want, "{name} deleting its stack in dev");
    }
    // Organization management is for owners.
    let wants = [Ok, Forbidden, Forbidden, Forbidden, Forbidden, Forbidden];
    for (i, ((name, c), want)) in who.iter().zip(wants).enumerate() {
        let r = gql(
            c,
            "mutation($s: String!) { teamCreate(slug: $s) { id } }",
            json!({"s": format!("team-{i}")}),
        )
        .await;
        assert_eq!(outcome(&r), want, "{name} creating a team");
        let r = gql(
            c,
            "mutation($e: String!) { userCreate(email: $e) { id } }",
            json!({"e": format!("new{i}@example.com")}),
        )
        .await;
        assert_eq!(outcome(&r), want, "{name} adding a user");
    }
    // The state backend agrees with the API.
    let http = app.http();
    let url = app.state_url(app.org(), "s-dev");
    for ((name, c), (read, write)) in
        who.iter()
            .zip([(204, 200), (204, 403), (204, 200), (204, 200), (404, 404), (404, 404)])
    {
        let token = c.token().unwrap().to_owned();
        let r = http.get(&url).basic_auth("u", Some(&token)).send().await.unwrap();
        assert_eq!(r.status().as_u16(), read, "{name} GET state");
        let body = json!({"version": 4, "serial": 1, "lineage": format!("L-{name}"), "resources": []}).to_string();
        let r = http
            .post(&url)
            .basic_auth("u", Some(&token))
            .body(body)
            .send()
            .await
            .unwrap();
        let status = r.status().as_u16();
        // Only the first successful writer stores serial 1; later writers of another
        // lineage are refused by the lineage rule, which also proves they got past authz.
        let status = if status == 409 { 200 } else { status };
        assert_eq!(status, write, "{name} POST state");
        let _ = http
            .delete(&url)
            .basic_auth("u", Some(&app.client.token().unwrap().to_owned()))
            .send()
            .await;
    }
    // A member without bindings sees no spaces; alice sees dev and dev-app.
    let spaces = |v: Value| -> Vec<String> {
        let mut s: Vec<String> = v["spaces"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["id"].as_str().unwrap().to_owned())
            .collect();
        s.sort();
        s
    };
    assert!(spaces(gql(&who[4].1, "{ spaces { id } }", json!({})).await.unwrap()).is_empty());
    assert_eq!(
        spaces(gql(&who[1].1, "{ spaces { id } }", json!({})).await.unwrap()),
        ["dev", "dev-app"]
    );
    app.teardown().await;
}
both_backends!(
    roles,
    Options {
        runners: 0,
        ..Options::default()
    },
    role_matrix
);

async fn space_rules(app: TestApp) {
    let c = &app.client;
    let q = "mutation($s: String!, $p: String) { spaceCreate(slug: $s, parent: $p) { id parent } }";
    let r = gql(c, q, json!({"s": "Bad Slug"})).await.unwrap_err();
    assert_eq!(r.code(), Some("bad_request"));
    assert!(r.to_string().contains("lowercase"), "{r}");
    let s = gql(c, q, json!({"s": "team-a"})).await.unwrap();
    assert_eq!(s["spaceCreate"]["parent"], "root");
    let r = gql(c, q, json!({"s": "team-a"})).await.unwrap_err();
    assert_eq!(r.code(), Some("space_exists"), "{r}");
    assert!(r.to_string().contains("team-a"), "{r}");
    let r = gql(c, q, json!({"s": "x", "p": "missing"})).await.unwrap_err();
    assert!(r.is_not_found(), "{r}");
    // A space holding a stack (or a space) can't be deleted; the root never.
    let input = terraplane_client::StackCreateInput {
        slug: Some("held".into()),
        name: "held".into(),
        repository: "file:///x".into(),
        ..Default::default()
    };
    let mut v = serde_json::to_value(&input).unwrap();
    v["space"] = json!("team-a");
    gql(
        c,
        "mutation($i: StackCreateInput!) { stackCreate(input: $i) { id space } }",
        json!({"i": v}),
    )
    .await
    .unwrap();
    let del = "mutation($s: ID!) { spaceDelete(id: $s) }";
    let r = gql(c, del, json!({"s": "team-a"})).await.unwrap_err();
    assert_eq!(r.code(), Some("space_not_empty"), "{r}");
    assert!(r.to_string().contains("1 stack"), "{r}");
    let r = gql(c, del, json!({"s": "root"})).await.unwrap_err();
    assert_eq!(r.code(), Some("space_not_empty"), "{r}");
    c.stack_delete("held").await.unwrap();
    assert_eq!(gql(c, del, json!({"s": "team-a"})).await.unwrap()["spaceDelete"], true);
    // Unknown roles and subjects are refused, nothing stored.
    gql(c, q, json!({"s": "team-b"})).await.unwrap();
    let grant =
        "mutation($sub: SubjectInput!, $r: String!) { roleGrant(space: \"team-b\", subject: $sub, role: $r) { role } }";
    let r = gql(
        c,
        grant,
        json!({"sub": {"user": "admin@terraplane.local"}, "r": "superuser"}),
    )
    .await
    .unwrap_err();
    assert_eq!(r.code(), Some("bad_request"));
    assert!(r.to_string().contains("reader, writer or admin"), "{r}");
    let r = gql(c, grant, json!({"sub": {"user": "nobody@example.com"}, "r": "reader"}))
        .await
        .unwrap_err();
    assert!(r.is_not_found(), "{r}");
    let r = gql(c, grant, json!({"sub": {"user": "a@b.c", "team": "t"}, "r": "reader"}))
        .await
        .unwrap_err();
    assert_eq!(r.code(), Some("bad_request"));
    let bindings = gql(c, "{ roleBindings { space } }", json!({})).await.unwrap();
    assert_eq!(bindings["roleBindings"], json!([]));
    // Users: bad email, short password, duplicate.
    let add = "mutation($e: String!, $p: String) { userCreate(email: $e, password: $p) { email role } }";
    assert_eq!(
        gql(c, add, json!({"e": "not-an-email"})).await.unwrap_err().code(),
        Some("bad_request")
    );
    assert_eq!(
        gql(c, add, json!({"e": "x@example.com", "p": "short"}))
            .await
            .unwrap_err()
            .code(),
        Some("bad_request")
    );
    gql(c, add, json!({"e": "x@example.com"})).await.unwrap();
    assert_eq!(
        gql(c, add, json!({"e": "x@example.com"})).await.unwrap_err().code(),
        Some("member_exists")
    );
    // Organizations: only instance administrators create them; duplicates are 409.
    let org = "mutation($s: String!) { orgCreate(slug: $s) { slug } }";
    let admin = login_admin(&app).await;
    assert_eq!(
        gql(&admin, org, json!({"s": "second"})).await.unwrap()["orgCreate"]["slug"],
        "second"
    );
    assert_eq!(
        gql(&admin, org, json!({"s": "second"})).await.unwrap_err().code(),
        Some("organization_exists")
    );
    assert_eq!(
        gql(&admin, org, json!({"s": "Not Valid"})).await.unwrap_err().code(),
        Some("bad_request")
    );
    // The bootstrap key is an owner of `default`, not an instance administrator.
    assert_eq!(
        gql(c, org, json!({"s": "third"})).await.unwrap_err().code(),
        Some("forbidden")
    );
    let orgs = gql(&admin, "{ organizations { slug } }", json!({})).await.unwrap();
    assert_eq!(orgs["organizations"], json!([{"slug": "default"}, {"slug": "second"}]));
    // The creator owns the new organization and can log in to it; its spaces are its own.
    let r = admin
        .with_token(None)
        .login("admin@terraplane.local", "admin-password", Some("second"))
        .await
        .unwrap();
    let second = admin.with_token(Some(r.token));
    let s = gql(&second, "{ spaces { id } }", json!({})).await.unwrap();
    assert_eq!(s["spaces"], json!([{"id": "root"}]));
    assert!(
        gql(&second, "{ space(id: \"team-b\") { id } }", json!({}))
            .await
            .unwrap()["space"]
            .is_null()
    );
    let r = gql(&second, "mutation { spaceDelete(id: \"team-b\") }", json!({}))
        .await
        .unwrap_err();
    assert!(r.is_not_found(), "{r}");
    app.teardown().await;
}
both_backends!(
    spaces,
    Options {
        runners: 0,
        ..Options::default()
    },
    space_rules
);

async fn login_admin(app: &TestApp) -> Client {
    let r = app
        .client
        .with_token(None)
        .login("admin@terraplane.local", "admin-password", None)
        .await
        .unwrap();
    app.client.with_token(Some(r.token))
}

async fn members(app: TestApp) {
    let c = &app.client;
    let add = "mutation($e: String!) { userCreate(email: $e, password: \"a-long-password-1\") { email role } }";
    gql(c, add, json!({"e": "bob@example.com"})).await.unwrap();
    gql(c, "mutation { spaceCreate(slug: \"dev\") { id } }", json!({}))
        .await
        .unwrap();
    gql(
        c,
        "mutation { roleGrant(space: \"dev\", subject: {user: \"bob@example.com\"}, role: \"writer\") { role } }",
        json!({}),
    )
    .await
    .unwrap();
    // The admin is the only owner: demoting or removing them is refused.
    let set = "mutation($e: String!, $o: Boolean!) { memberSetRole(email: $e, owner: $o) { role } }";
    let r = gql(c, set, json!({"e": "admin@terraplane.local", "o": false}))
        .await
        .unwrap_err();
    assert_eq!(r.code(), Some("last_owner"), "{r}");
    let r = gql(
        c,
        "mutation { memberRemove(email: \"admin@terraplane.local\") }",
        json!({}),
    )
    .await
    .unwrap_err();
    assert_eq!(r.code(), Some("last_owner"), "{r}");
    // With a second owner, the first may step down.
    assert_eq!(
        gql(c, set, json!({"e": "bob@example.com", "o": true})).await.unwrap()["memberSetRole"]["role"],
        "owner"
    );
    gql(c, set, json!({"e": "admin@terraplane.local", "o": false}))
        .await
        .unwrap();
    let users = gql(c, "{ users { email role } }", json!({})).await.unwrap();
    let mut users = users["users"].as_array().unwrap().clone();
    users.sort_by_key(|u| u["email"].as_str().unwrap().to_owned());
    assert_eq!(
        users,
        [
            json!({"email": "admin@terraplane.local", "role": "member"}),
            json!({"email": "bob@example.com", "role": "owner"})
        ]
    );
    // Removing bob (now an owner, not the last) drops his bindings; his session dies.
    let login = c
        .with_token(None)
        .login("bob@example.com", "a-long-password-1", None)
        .await
        .unwrap();
    let bob = c.with_token(Some(login.token));
    assert!(bob.stacks().await.is_ok());
    gql(&bob, set, json!({"e": "admin@terraplane.local", "o": true}))
        .await
        .unwrap();
    gql(c, "mutation { memberRemove(email: \"bob@example.com\") }", json!({}))
        .await
        .unwrap();
    assert!(bob.stacks().await.unwrap_err().is_unauthenticated());
    let bindings = gql(c, "{ roleBindings { subject } }", json!({})).await.unwrap();
    assert_eq!(bindings["roleBindings"], json!([]));
    let r = gql(c, "mutation { memberRemove(email: \"bob@example.com\") }", json!({}))
        .await
        .unwrap_err();
    assert!(r.is_not_found(), "{r}");
    app.teardown().await;
}
both_backends!(
    membership,
    Options {
        runners: 0,
        ..Options::default()
    },
    members
);
