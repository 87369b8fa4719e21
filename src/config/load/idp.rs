//! `[idp]`: the issuer whose tokens identify people, and the policies of
//! its groups (`[[idp.teams]]`); `[[teams]]`: budgets a team shares. Only data and validation: fetching the
//! keys and checking tokens is `crate::idp`'s.

use super::keys::idp::*;
use super::*;

pub(super) fn idp(top: &Section<'_, '_>) -> Option<IdpSettings> {
    let t = top.table("idp")?;
    let issuer = match t.string(&ISSUER) {
        Some(i) if i.value.starts_with("https://") || i.value.starts_with("http://") => {
            Some(i.value.trim_end_matches('/').to_string())
        }
        Some(i) => {
            i.problem(
                t.doc(),
                format!("`{}` is not an issuer URL", i.value),
                Some("write the issuer as its tokens name it: \"https://example.okta.com/oauth2/default\"".into()),
            );
            None
        }
        None => {
            t.problem(
                ISSUER.name,
                "missing",
                Some("add `issuer = \"https://…\"`: the `iss` of the tokens".into()),
            );
            None
        }
    };
    let audience = match t.string_list(&AUDIENCE) {
        Some(a) if !a.is_empty() => Some(a.into_iter().map(|a| a.value).collect::<Vec<_>>()),
        _ => {
            t.problem(
                AUDIENCE.name,
                "missing",
                Some(
                    "add `audience = \"weir\"`: the `aud` the IdP puts in tokens for this gateway"
                        .into(),
                ),
            );
            None
        }
    };
    let jwks_url = t.string(&JWKS_URL).map(|u| u.value);
    let text = |key: &Key| t.string(key).map_or(key.text().to_string(), |v| v.value);
    let user_claim = text(&USER_CLAIM);
    let team_claim = text(&TEAM_CLAIM);
    let leeway = match t.raw_present(&LEEWAY) {
        true => t.duration(&LEEWAY),
        false => Some(LEEWAY.duration()),
    };
    let refresh = match t.raw_present(&REFRESH) {
        true => t.duration(&REFRESH),
        false => Some(REFRESH.duration()),
    };
    let ca_file = ca_file(&t, &CA_FILE).map(|f| f.value);
    let teams = teams(&t);
    Some(IdpSettings {
        issuer: issuer?,
        audience: audience?,
        jwks_url,
        user_claim,
        team_claim,
        leeway: leeway?,
        refresh: refresh?,
        ca_file,
        teams: teams?,
    })
}

/// `[[idp.teams]]`: each group's policy.
fn teams(t: &Section<'_, '_>) -> Option<Vec<TeamPolicy>> {
    let mut ok = true;
    let mut out: Vec<TeamPolicy> = Vec::new();
    for team in t.tables(&TEAMS) {
        let name = team.string("name");
        let models = super::usage::allowed_models(&team);
        let budget = super::usage::budget(super::usage::budget_keys(&team), Budget::default());
        let max_concurrent = team
            .uint_in("max_concurrent", MAX_SEMAPHORE_PERMITS)
            .unwrap_or(0);
        let groups = group_names(&team, &out);
        let Some(name) = team_name(
            &team,
            name,
            |n| out.iter().any(|o| o.name == n),
            [
                "the group as the token names it",
                "give each group one policy",
            ],
        ) else {
            ok = false;
            continue;
        };
        let (Some(models), Some(groups)) = (models, groups) else {
            ok = false;
            continue;
        };
        let groups = match groups.is_empty() {
            true => vec![name.value.clone()],
            false => groups,
        };
        out.push(TeamPolicy {
            name: name.value,
            groups,
            models,
            budget,
            max_concurrent: usize::try_from(max_concurrent).unwrap_or(usize::MAX),
        });
    }
    ok.then_some(out)
}

/// An `[[idp.teams]]` table's `groups`: each a group a token can name
/// (not empty, at most 256 bytes, as a claim's text is read), and in no
/// team listed before (`before`: a person must have one policy); empty
/// when not given (the team's `name` is then its group).
fn group_names(team: &Section<'_, '_>, before: &[TeamPolicy]) -> Option<Vec<String>> {
    let Some(listed) = team.string_list("groups") else {
        return Some(Vec::new());
    };
    let mut ok = true;
    if listed.is_empty() {
        team.problem(
            "groups",
            "is empty",
            Some(
                "list the groups whose members are this team, or remove `groups` to use its name"
                    .into(),
            ),
        );
        ok = false;
    }
    for g in &listed {
        if g.value.is_empty() || g.value.len() > 256 {
            g.problem(
                team.doc(),
                "a group is 1 to 256 bytes, as the token names it".to_string(),
                None,
            );
            ok = false;
        } else if let Some(other) = before.iter().find(|t| t.groups.contains(&g.value)) {
            g.problem(
                team.doc(),
                format!("group `{}` is also team `{}`'s", g.value, other.name),
                Some("a group belongs to one team: list it once".into()),
            );
            ok = false;
        }
    }
    ok.then(|| listed.into_iter().map(|g| g.value).collect())
}

/// A team table's `name`, present and not listed before (`listed`);
/// else its problem, with `[what the name is, how to list it once]`.
fn team_name(
    team: &Section<'_, '_>,
    name: Option<At<String>>,
    listed: impl Fn(&str) -> bool,
    [meaning, once]: [&str; 2],
) -> Option<At<String>> {
    let Some(name) = name else {
        team.problem(
            "name",
            "missing",
            Some(format!("add `name = \"platform\"`: {meaning}")),
        );
        return None;
    };
    if listed(&name.value) {
        name.problem(
            team.doc(),
            format!("team `{}` is listed twice", name.value),
            Some(once.into()),
        );
        return None;
    }
    Some(name)
}

/// `[[teams]]`: the budget each team shares, by the team's name (a key's
/// `team`, or the IdP policy a person is under).
pub(super) fn team_budgets(top: &Section<'_, '_>) -> Option<Vec<TeamBudget>> {
    let mut ok = true;
    let mut out: Vec<TeamBudget> = Vec::new();
    for team in top.tables("teams") {
        let name = team.string("name");
        let budget = super::usage::budget(super::usage::budget_keys(&team), Budget::default());
        let Some(name) = team_name(
            &team,
            name,
            |n| out.iter().any(|o| o.name == n),
            [
                "the team as keys and the IdP name it",
                "give each team one budget",
            ],
        ) else {
            ok = false;
            continue;
        };
        if budget.is_unbounded() {
            name.problem(
                team.doc(),
                format!("team `{}` has no budget", name.value),
                Some("add a bound such as `spend_per_month = 500.0`, or remove the table".into()),
            );
            ok = false;
            continue;
        }
        out.push(TeamBudget {
            name: name.value,
            budget,
        });
    }
    ok.then_some(out)
}
