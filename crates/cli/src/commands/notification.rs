//! `tpctl notification …`: endpoints that receive run, drift and policy events, and the
//! deliveries to them (attempts, status codes, errors).

use anyhow::Result;
use terraplane_client::{NotificationEndpointInput, NotificationEvent, NotificationKind};

use super::App;
use crate::cli::{
    NotificationCommand, NotificationEndpointCommand, NotificationEndpointCreateArgs, NotificationEventArg,
    NotificationKindArg,
};
use crate::output;

impl App<'_, '_> {
    pub(super) async fn notification(&mut self, cmd: NotificationCommand) -> Result<()> {
        match cmd {
            NotificationCommand::Endpoint(c) => self.notification_endpoint(c).await,
            NotificationCommand::Deliveries { endpoint_id, limit } => {
                let deliveries = self
                    .client
                    .notification_deliveries(endpoint_id.as_deref(), limit)
                    .await?;
                if deliveries.is_empty() && !self.json_mode() {
                    return self.remark("No notification deliveries.\n");
                }
                self.show(&deliveries, |d| output::notification_deliveries_table(d))
            }
        }
    }

    async fn notification_endpoint(&mut self, cmd: NotificationEndpointCommand) -> Result<()> {
        match cmd {
            NotificationEndpointCommand::Create(a) => {
                let input = self.endpoint_input(a)?;
                let e = self.client.notification_endpoint_create(&input).await?;
                self.show(&e, |e| {
                    format!(
                        "Created notification endpoint {}\n\n{}",
                        e.id,
                        output::notification_endpoint(e)
                    )
                })
            }
            NotificationEndpointCommand::List => {
                let endpoints = self.client.notification_endpoints().await?;
                if endpoints.is_empty() && !self.json_mode() {
                    return self.remark("No notification endpoints.\n");
                }
                self.show(&endpoints, |e| output::notification_endpoints_table(e))
            }
            NotificationEndpointCommand::Delete { id } => {
                let e = self.client.notification_endpoint_delete(&id).await?;
                self.show(&e, |e| format!("Deleted notification endpoint {}\n", e.id))
            }
        }
    }

    /// The API input; a secret given as `-` is read from stdin.
    fn endpoint_input(&mut self, mut a: NotificationEndpointCreateArgs) -> Result<NotificationEndpointInput> {
        if a.secret.as_deref() == Some("-") {
            a.secret = Some(self.stdin_value(false)?);
        }
        Ok(create_input(a))
    }
}

fn create_input(a: NotificationEndpointCreateArgs) -> NotificationEndpointInput {
    // `--event a,b --event a` asks for a once.
    let mut events = Vec::new();
    for e in a.events.into_iter().map(event_of) {
        if !events.contains(&e) {
            events.push(e);
        }
    }
    NotificationEndpointInput {
        id: a.id,
        name: a.name,
        kind: kind_of(a.kind),
        url: a.url,
        secret: a.secret,
        events,
        stack_labels: (!a.labels.is_empty()).then_some(a.labels),
        space: a.space,
    }
}

fn kind_of(k: NotificationKindArg) -> NotificationKind {
    match k {
        NotificationKindArg::Webhook => NotificationKind::Webhook,
        NotificationKindArg::Slack => NotificationKind::Slack,
        NotificationKindArg::Pagerduty => NotificationKind::Pagerduty,
        NotificationKindArg::Teams => NotificationKind::Teams,
    }
}

fn event_of(e: NotificationEventArg) -> NotificationEvent {
    match e {
        NotificationEventArg::RunNeedsConfirmation => NotificationEvent::RunNeedsConfirmation,
        NotificationEventArg::RunPendingReview => NotificationEvent::RunPendingReview,
        NotificationEventArg::RunFailed => NotificationEvent::RunFailed,
        NotificationEventArg::RunFinished => NotificationEvent::RunFinished,
        NotificationEventArg::DriftDetected => NotificationEvent::DriftDetected,
        NotificationEventArg::DriftResolved => NotificationEvent::DriftResolved,
        NotificationEventArg::PolicyDenied => NotificationEvent::PolicyDenied,
    }
}

#[cfg(test)]
mod tests {
    use clap::ValueEnum;

    use super::*;

    /// A flag value's API name: `drift-detected` is `DRIFT_DETECTED`.
    fn api_name<T: ValueEnum>(v: &T) -> Option<String> {
        v.to_possible_value()
            .map(|p| p.get_name().to_uppercase().replace('-', "_"))
    }

    #[test]
    fn kinds_and_events_are_the_apis() {
        for k in NotificationKindArg::value_variants() {
            assert_eq!(api_name(k).as_deref(), Some(kind_of(*k).as_str()));
        }
        for e in NotificationEventArg::value_variants() {
            let api = event_of(*e);
            assert_eq!(api_name(e).as_deref(), Some(api.as_str()));
            assert!(!matches!(api, NotificationEvent::Other(_)));
        }
        assert_eq!(NotificationEventArg::value_variants().len(), 7);
    }

    #[test]
    fn create_drops_repeated_events_and_leaves_unset_fields_to_the_server() {
        let input = create_input(NotificationEndpointCreateArgs {
            name: "ops".into(),
            kind: NotificationKindArg::Slack,
            url: "https://hooks.slack.com/x".into(),
            secret: None,
            events: vec![
                NotificationEventArg::DriftDetected,
                NotificationEventArg::RunFailed,
                NotificationEventArg::DriftDetected,
            ],
            labels: vec![],
            space: None,
            id: None,
        });
        assert_eq!(
            input,
            NotificationEndpointInput {
                name: "ops".into(),
                kind: NotificationKind::Slack,
                url: "https://hooks.slack.com/x".into(),
                events: vec![NotificationEvent::DriftDetected, NotificationEvent::RunFailed],
                ..Default::default()
            }
        );
    }
}
