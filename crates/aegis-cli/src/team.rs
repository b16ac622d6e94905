//! `aegis team`: the members of a shared history with their roles, and the audit log of who
//! decided and changed what.

use std::io::Write;

use aegis_store::{format_millis, MemberRole};
use anyhow::Result;

use crate::history_cmd::DbArgs;
use crate::ExitStatus;

#[derive(Debug, clap::Args)]
pub struct TeamArgs {
    #[command(subcommand)]
    pub command: TeamCommand,
    #[command(flatten)]
    pub db: DbArgs,
}

#[derive(Debug, clap::Subcommand)]
pub enum TeamCommand {
    /// The members and their roles (none: a console of one, where anyone may do anything).
    List {
        #[arg(long)]
        json: bool,
    },
    /// Name a member or change their role. A team starts with an admin naming themselves
    /// (`aegis team add --as rina rina --role admin`); after that, admins name the others.
    Add {
        name: String,
        /// reviewer (claims and decides), author (also templates and heads) or admin (also the
        /// queue, retention, deletions and members).
        #[arg(long, value_parser = parse_role)]
        role: MemberRole,
    },
    /// Take a member off the team (admins; never the last admin).
    Remove { name: String },
    /// The audit log, newest first: every decision, undo, template save, head applied, setting
    /// changed and deletion, with who did it.
    Log {
        /// Only this member's entries.
        #[arg(long)]
        actor: Option<String>,
        #[arg(long, default_value_t = 50)]
        limit: u32,
        /// Entries before this id (the next page).
        #[arg(long)]
        before: Option<i64>,
        #[arg(long)]
        json: bool,
    },
}

fn parse_role(role: &str) -> Result<MemberRole, String> {
    role.parse()
        .map_err(|e: aegis_store::StoreError| e.to_string())
}

pub fn run(args: TeamArgs) -> Result<ExitStatus> {
    let runtime = tokio::runtime::Runtime::new()?;
    runtime.block_on(run_async(args))
}

async fn run_async(args: TeamArgs) -> Result<ExitStatus> {
    let store = args.db.open().await?;
    let actor = args.db.actor();
    match args.command {
        TeamCommand::List { json } => {
            let members = store.members().await?;
            if json {
                println!("{}", serde_json::to_string_pretty(&members)?);
            } else if members.is_empty() {
                println!("no members: anyone may do anything; `aegis team add --as NAME NAME --role admin` starts a team");
            } else {
                for m in &members {
                    println!(
                        "{:<24} {:<9} added by {} {}",
                        m.name,
                        m.role.as_str(),
                        m.added_by,
                        format_millis(m.added_at)
                    );
                }
            }
        }
        TeamCommand::Add { name, role } => {
            let member = store.set_member(&actor, &name, role).await?;
            println!("{} is a team {}", member.name, member.role.as_str());
        }
        TeamCommand::Remove { name } => {
            if !store.remove_member(&actor, &name).await? {
                anyhow::bail!("{name} is not a member of this team");
            }
            println!("{name} is off the team");
        }
        TeamCommand::Log {
            actor,
            limit,
            before,
            json,
        } => {
            let entries = store.audit_log(actor.as_deref(), before, limit).await?;
            if json {
                println!("{}", serde_json::to_string_pretty(&entries)?);
            } else {
                for e in &entries {
                    let login = if e.login.is_empty() || e.login == e.actor {
                        String::new()
                    } else {
                        format!(" (login {})", e.login)
                    };
                    println!(
                        "{:>7}  {:<24}  {}{login}  {}  {}  {}",
                        e.id,
                        format_millis(e.at),
                        e.actor,
                        e.action,
                        e.subject,
                        e.detail
                    );
                }
                if entries.len() == limit as usize {
                    if let Some(last) = entries.last() {
                        println!("more: --before {}", last.id);
                    }
                }
            }
        }
    }
    std::io::stdout().flush()?;
    store.close().await;
    Ok(ExitStatus::Passed)
}
