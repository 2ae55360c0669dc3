//! Switching a knob from the editor: `session/set_config_option` (any knob, the model too) and
//! `session/set_mode` (the sandbox mode, as ACP session modes) go through [`switch`], so both
//! check, write and report a switch the same way, and a client using either mechanism sees the
//! other's value: a mode switched as a config option is also announced as `current_mode_update`,
//! one switched as a session mode as `config_option_update`.

use std::sync::Arc;

use agent_client_protocol::v1::ConnectionTo;
use agent_client_protocol::v1::schema::{ConfigOptionUpdate, CurrentModeUpdate, SessionUpdate};
use agent_client_protocol::{Client, Error};

use super::config_options::Switch;
use super::error::AcpError;
use super::sessions::Session;
use crate::narrowing;
use crate::session::{Event, LogError};
use crate::tools::Stopping;

/// Which request asked for the switch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Asked {
    ConfigOption,
    Mode,
}

/// Applies `switch` to `session` and answers with `respond`: at once, or, when the switch
/// narrowed the mode and stopped background tasks, off the dispatch loop once their stops are
/// recorded and shown. A mode the helper would not run is refused, and so is a model whose
/// provider could not be built (the current one may stay selected). Before the answer, the
/// editor is told the new mode the other way it may track it.
pub async fn switch(
    session: Arc<Session>,
    switch: Switch,
    asked: Asked,
    cx: ConnectionTo<Client>,
    respond: impl FnOnce(&Session, Result<(), Error>) -> Result<(), Error> + Send + 'static,
) -> Result<(), Error> {
    if let Switch::Mode(mode) = switch
        && mode != session.effective_mode()
        && let Some(why) = session.tools.composition().refusal(mode)
    {
        return respond(&session, Err(AcpError::ModeRefused { mode, why }.into()));
    }
    if let Switch::Model(name) = &switch
        && *name != session.selected_model().name
        && let Some(model) = session.models().get(name)
        && let Err(why) = session.models().provider_of(model)
    {
        return respond(&session, Err(AcpError::ModelRefused(why).into()));
    }
    let log_error = |e| Error::from(AcpError::LogWrite(e));
    let stopping = match session.switch(switch.clone()) {
        Ok(stopping) => stopping,
        Err(e) => return respond(&session, Err(log_error(e))),
    };
    let Some(stopping) = stopping else {
        announce(&session, &switch, asked, &cx).await;
        return respond(&session, Ok(()));
    };
    // The narrowing stopped tasks: their ends are waited for (up to the kill grace and the
    // helper's answer) off the dispatch loop, and each stop is shown before the answer.
    tokio::spawn(async move {
        let reported = report_stopped(&session, stopping, &cx).await;
        if reported.is_ok() {
            announce(&session, &switch, asked, &cx).await;
        }
        let _ = respond(&session, reported.map_err(log_error));
    });
    Ok(())
}

/// Waits until the tasks a narrowing stopped have ended, then records each stop
/// (`task/stopped`, synced) and shows it to the editor as the end of the call that started the
/// task.
async fn report_stopped(
    session: &Session,
    stopping: Stopping,
    cx: &ConnectionTo<Client>,
) -> Result<(), LogError> {
    for stopped in stopping.ended(session.tools.shell()).await {
        let text = narrowing::client_text(
            &stopped.task_id,
            stopped.ran_under,
            stopped.narrowed_to,
            stopped.confirmed,
        );
        let record = session.append(
            Event::TaskStopped {
                task_id: stopped.task_id,
                call_id: stopped.call_id,
                ran_under: stopped.ran_under,
                narrowed_to: stopped.narrowed_to,
                text,
                facts: stopped.facts,
            },
            true,
        )?;
        session.show_record(cx, &record).await;
    }
    Ok(())
}

/// Tells the editor of a sandbox-mode switch the way the request did not.
async fn announce(session: &Session, switch: &Switch, asked: Asked, cx: &ConnectionTo<Client>) {
    if !matches!(switch, Switch::Mode(_)) {
        return;
    }
    let update = match asked {
        Asked::ConfigOption => SessionUpdate::CurrentModeUpdate(CurrentModeUpdate::new(
            session.modes().current_mode_id,
        )),
        Asked::Mode => {
            SessionUpdate::ConfigOptionUpdate(ConfigOptionUpdate::new(session.config_options()))
        }
    };
    let _ = session.show(cx, update).await;
}
