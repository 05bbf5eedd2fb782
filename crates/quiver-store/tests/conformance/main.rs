//! One store conformance suite, run against every backend: each case is written once, as a
//! function of a [`backend::Fixture`], and runs on a fresh SQLite file (always) and on a fresh
//! schema of the PostgreSQL database named by `QUIVER_TEST_POSTGRES` (skipped, saying why,
//! without it; failing instead when `QUIVER_REQUIRE_POSTGRES=1`, as in scripts/test.sh).
//! `cargo nextest run -p quiver-store -E 'test(/^postgres::/)'` runs one backend.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stderr)]

mod backend;
mod change_cases;
mod instance_cases;
mod lease_cases;
mod operator_card_cases;
mod postgres_only;
mod race_cases;
mod read_together_cases;
mod request_state_cases;
mod sqlite_only;
mod store_cases;
mod turn_cases;
mod workflow_cases;

/// One `#[test]` per case and backend, in a module per backend.
macro_rules! suite {
    ($($module:ident :: $case:ident),* $(,)?) => {
        mod sqlite {
            $(
                #[test]
                fn $case() {
                    crate::backend::run(crate::backend::Backend::Sqlite, crate::$module::$case);
                }
            )*
        }
        mod postgres {
            $(
                #[test]
                fn $case() {
                    crate::backend::run(crate::backend::Backend::Postgres, crate::$module::$case);
                }
            )*
        }
    };
}

suite!(
    store_cases::the_store_is_object_safe_and_shareable,
    store_cases::sessions,
    store_cases::idle_sessions_of_one_agent_are_purged_with_what_they_hold,
    store_cases::session_errors,
    store_cases::loaded_tools_are_an_lru_set,
    store_cases::a_shrunk_capacity_evicts_down_to_it_and_sessions_never_share,
    store_cases::opened_packages_and_active_skills,
    store_cases::every_presence_change_moves_the_stamp_and_nothing_else_does,
    read_together_cases::a_turns_reads_together_match_the_separate_reads,
    store_cases::consents,
    store_cases::once_approvals_are_keyed_on_session_and_tool,
    store_cases::once_approvals_of_a_session_are_listed_together,
    store_cases::kept_outputs_are_per_session_and_bounded,
    store_cases::the_perception_cache_answers_fresh_results_under_their_own_key_only,
    store_cases::the_perception_cache_is_bounded_expired_rows_first_then_the_oldest,
    store_cases::unfinished_calls_are_started_records_without_an_end,
    store_cases::a_retried_call_finds_its_card_and_uses_the_answer_once,
    store_cases::approvals_are_answered_exactly_once,
    store_cases::a_card_whose_waiter_is_gone_is_withdrawn_and_cannot_be_approved,
    store_cases::racing_answers_resolve_once,
    store_cases::waiting_for_an_approval,
    store_cases::audit_records_are_queried_newest_first,
    store_cases::audit_lists_in_commit_order_when_the_clock_steps_back,
    store_cases::every_audit_step_round_trips_through_serde_and_the_store,
    workflow_cases::fifty_threads_with_one_key_make_one_run,
    workflow_cases::progress_is_conditional_and_late_results_are_discarded,
    workflow_cases::an_attempts_process_is_recorded_only_while_the_run_runs_it,
    workflow_cases::a_step_result_its_move_and_its_audit_commit_together,
    workflow_cases::waits_are_stored_then_resolved_once,
    workflow_cases::fires_and_deliveries_start_once_across_two_stores,
    workflow_cases::events_are_read_after_a_point,
    workflow_cases::the_fan_out_reads_every_event_after_a_point_and_the_last_fire,
    workflow_cases::cursors_start_once_and_only_move_forward_across_two_stores,
    workflow_cases::an_ordered_gate_holds_a_run_behind_older_and_begun_runs,
    workflow_cases::a_runs_session_is_stored_with_its_row_and_an_existing_one_is_kept,
    workflow_cases::a_package_starts_no_run_beyond_its_bound_of_active_runs,
    instance_cases::instances_heartbeat_and_a_dead_one_is_reaped_by_exactly_one_other,
    instance_cases::a_dead_instances_call_in_flight_is_closed_interrupted_once,
    lease_cases::of_two_claimers_of_one_attempt_one_wins,
    lease_cases::an_expired_lease_is_taken_over_with_a_higher_epoch,
    lease_cases::a_stale_epoch_write_changes_nothing,
    lease_cases::a_heartbeat_extends_only_the_current_holders_lease,
    race_cases::concurrent_loads_into_one_session_never_pass_the_cap,
    race_cases::two_answers_to_one_approval_from_two_stores_one_wins,
    race_cases::a_wait_sees_an_answer_written_by_another_store,
    operator_card_cases::a_card_matches_its_exact_call_once_and_before_it_expires,
    operator_card_cases::a_card_for_one_session_matches_only_there,
    operator_card_cases::two_cards_for_one_call_are_two_uses_oldest_first,
    operator_card_cases::invalid_cards_are_refused,
    operator_card_cases::the_list_shows_live_cards_and_recently_ended_ones,
    operator_card_cases::a_revoked_card_matches_no_call_and_is_listed_as_revoked,
    operator_card_cases::only_a_live_card_is_revoked,
    operator_card_cases::of_racing_calls_exactly_one_uses_the_card,
    operator_card_cases::of_a_use_and_a_revoke_racing_from_two_stores_one_wins,
    request_state_cases::of_spenders_on_two_stores_exactly_one_is_first,
    request_state_cases::a_spent_state_replays_its_stored_result_once_stored,
    request_state_cases::expired_spent_states_are_pruned,
    turn_cases::turn_writers_on_two_stores_never_lose_a_lockout,
    turn_cases::held_turns_are_written_only_at_the_version_read,
    turn_cases::of_claimants_on_two_stores_exactly_one_asks,
    turn_cases::a_question_released_expired_or_answered_is_asked_anew,
    change_cases::writes_are_heard_with_their_kind_and_id,
);
