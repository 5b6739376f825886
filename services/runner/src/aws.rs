//! AWS dynamic credentials: the phase's identity token exchanged with STS
//! `AssumeRoleWithWebIdentity` (an unsigned call: the token is the credential).

use aws_sdk_sts::config::{BehaviorVersion, Region};
use aws_sdk_sts::error::ProvideErrorMetadata;
use terraplane_protocol::AwsAssume;

use crate::RunnerSettings;

pub struct Credentials {
    pub access_key_id: String,
    pub secret_access_key: String,
    pub session_token: String,
}

/// Temporary credentials for `a.role_arn`, or STS's own error message.
pub async fn assume_role(settings: &RunnerSettings, a: &AwsAssume) -> Result<Credentials, String> {
    let mut conf = aws_sdk_sts::Config::builder()
        .behavior_version(BehaviorVersion::latest())
        .region(Region::new(settings.sts_region.clone()));
    if let Some(e) = &settings.sts_endpoint {
        conf = conf.endpoint_url(e.clone());
    }
    let client = aws_sdk_sts::Client::from_conf(conf.build());
    let out = client
        .assume_role_with_web_identity()
        .role_arn(&a.role_arn)
        .role_session_name(&a.session_name)
        .web_identity_token(&a.web_identity_token)
        .duration_seconds(a.duration_secs)
        .send()
        .await
        .map_err(|e| {
            let detail = match (e.code(), e.message()) {
                (Some(c), Some(m)) => format!("{c}: {m}"),
                (None, Some(m)) => m.to_owned(),
                _ => aws_sdk_sts::error::DisplayErrorContext(&e).to_string(),
            };
            format!("AWS STS AssumeRoleWithWebIdentity for {} failed: {detail}", a.role_arn)
        })?;
    let c = out
        .credentials()
        .ok_or_else(|| format!("AWS STS returned no credentials for {}", a.role_arn))?;
    Ok(Credentials {
        access_key_id: c.access_key_id().to_owned(),
        secret_access_key: c.secret_access_key().to_owned(),
        session_token: c.session_token().to_owned(),
    })
}
