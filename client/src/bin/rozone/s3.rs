//! `rozone s3 getsecret [--user U]` (as Ozone's `ozone s3 getsecret`: `awsAccessKey=…` and
//! `awsSecret=…` lines, so scripts written for Ozone work) and `rozone admin s3 revoke`.

use std::process::ExitCode;

use clap::Subcommand;

use crate::cluster::ClusterArgs;
use crate::output::json;

#[derive(Debug, Subcommand)]
pub enum S3Command {
    /// Print the user's S3 access key and secret, creating them on first use.
    Getsecret {
        /// The user (the access key id); default: $USER, else "admin".
        #[arg(long, short = 'u')]
        user: Option<String>,
    },
}

#[derive(Debug, Subcommand)]
pub enum S3AdminCommand {
    /// Remove an S3 access key id: signatures made with its secret are refused from now on.
    Revoke {
        /// The access key id (the user name).
        #[arg(long, short = 'u', alias = "access-id")]
        user: String,
    },
}

fn default_user() -> String {
    std::env::var("USER")
        .ok()
        .filter(|u| !u.is_empty())
        .unwrap_or_else(|| "admin".into())
}

pub async fn run(cluster: &ClusterArgs, as_json: bool, cmd: S3Command) -> anyhow::Result<ExitCode> {
    let client = cluster.client()?;
    match cmd {
        S3Command::Getsecret { user } => {
            let user = user.unwrap_or_else(default_user);
            let s = client.om.get_s3_secret(&user).await?;
            if as_json {
                json(&s)?;
            } else {
                println!("awsAccessKey={}", s.access_id);
                println!("awsSecret={}", s.secret);
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

pub async fn admin(client: &rozone_client::Client, cmd: S3AdminCommand) -> anyhow::Result<()> {
    match cmd {
        S3AdminCommand::Revoke { user } => {
            client.om.revoke_s3_secret(&user).await?;
            println!("revoked S3 access key {user}");
        }
    }
    Ok(())
}
