//! The model over a planted bug of `tools/mutants/mutants.txt`, without touching the scripts
//! on disk: [`Patch`] edits a script file's text as `tools/mutants/run.py` edits the file (in
//! every script that joins the file), and [`Mutated`] runs a model with the patch on every
//! script its steps run, on whichever thread runs them (the checker's, or the one that rebuilds
//! a path to print it).

use std::borrow::Cow;
use std::cell::RefCell;
use std::sync::Arc;

use stateright::{Model, Property};

thread_local! {
    static PATCH: RefCell<Option<Arc<Patch>>> = const { RefCell::new(None) };
}

/// `text` as this thread runs it: patched while it runs a [`Mutated`] model's step.
pub(crate) fn patched(text: &'static str) -> Cow<'static, str> {
    PATCH.with(|p| match &*p.borrow() {
        Some(patch) => Cow::Owned(patch.apply(text).into_owned()),
        None => Cow::Borrowed(text),
    })
}

/// A planted bug: one script file's text with `find` replaced, as `tools/mutants/run.py`
/// edits the file.
#[derive(Clone, Debug)]
pub(crate) struct Patch {
    file_text: String,
    patched: String,
}

impl Patch {
    /// The mutant `id` of `tools/mutants/mutants.txt` (a file under `scripts/`).
    pub(crate) fn mutant(id: &str) -> Patch {
        let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../..");
        let list = std::fs::read_to_string(format!("{root}/tools/mutants/mutants.txt"))
            .expect("tools/mutants/mutants.txt");
        let block = list
            .split("\n\n")
            .find(|b| b.lines().any(|l| l == format!("id: {id}")))
            .unwrap_or_else(|| panic!("no mutant {id}"));
        let field = |name: &str| {
            block
                .lines()
                .find_map(|l| l.strip_prefix(&format!("{name}: ")))
                .unwrap_or_else(|| panic!("mutant {id} has no {name}"))
                .replace("\\n", "\n")
        };
        let file_text = std::fs::read_to_string(format!("{root}/{}", field("file")))
            .expect("the mutant's file");
        let find = field("find");
        assert_eq!(
            file_text.matches(&find).count(),
            1,
            "mutant {id}: `find` must occur once in its file (is it applied already?)"
        );
        let patched = file_text.replacen(&find, &field("replace"), 1);
        Patch { file_text, patched }
    }

    /// `text` with the file's text in it patched (unchanged when it does not join the file).
    pub(crate) fn apply<'a>(&self, text: &'a str) -> Cow<'a, str> {
        if text.contains(&self.file_text) {
            Cow::Owned(text.replacen(&self.file_text, &self.patched, 1))
        } else {
            Cow::Borrowed(text)
        }
    }

    /// Run `f` with this patch on the scripts this thread runs.
    fn with<T>(self: &Arc<Self>, f: impl FnOnce() -> T) -> T {
        PATCH.with(|p| *p.borrow_mut() = Some(self.clone()));
        let out = f();
        PATCH.with(|p| *p.borrow_mut() = None);
        out
    }
}

/// A model run over a planted bug: `inner`'s steps with `patch` on every script they run (on
/// whichever thread runs them, the checker's or the one rebuilding a path).
pub(crate) struct Mutated<M: Model> {
    pub(crate) inner: M,
    patch: Arc<Patch>,
    properties: Vec<Property<M>>,
}

impl<M: Model> Mutated<M> {
    pub(crate) fn new(inner: M, patch: Patch) -> Mutated<M> {
        let properties = inner.properties();
        assert!(
            properties.len() <= CONDITIONS,
            "more properties than trampolines"
        );
        Mutated {
            inner,
            patch: Arc::new(patch),
            properties,
        }
    }
}

/// How many properties a [`Mutated`] model carries over (its conditions are plain `fn`s, so
/// each forwards to the inner property of its index).
const CONDITIONS: usize = 12;

/// A [`Mutated`] model's property condition.
type Condition<M> = fn(&Mutated<M>, &<M as Model>::State) -> bool;

fn condition<M: Model, const I: usize>(m: &Mutated<M>, s: &M::State) -> bool {
    (m.properties[I].condition)(&m.inner, s)
}

fn conditions<M: Model>() -> [Condition<M>; CONDITIONS] {
    [
        condition::<M, 0>,
        condition::<M, 1>,
        condition::<M, 2>,
        condition::<M, 3>,
        condition::<M, 4>,
        condition::<M, 5>,
        condition::<M, 6>,
        condition::<M, 7>,
        condition::<M, 8>,
        condition::<M, 9>,
        condition::<M, 10>,
        condition::<M, 11>,
    ]
}

impl<M: Model> Model for Mutated<M> {
    type State = M::State;
    type Action = M::Action;

    fn init_states(&self) -> Vec<M::State> {
        self.patch.with(|| self.inner.init_states())
    }

    fn actions(&self, state: &M::State, actions: &mut Vec<M::Action>) {
        self.patch.with(|| self.inner.actions(state, actions))
    }

    fn next_state(&self, last: &M::State, action: M::Action) -> Option<M::State> {
        self.patch.with(|| self.inner.next_state(last, action))
    }

    fn properties(&self) -> Vec<Property<Self>> {
        self.properties
            .iter()
            .zip(conditions::<M>())
            .map(|(p, condition)| Property {
                expectation: p.expectation.clone(),
                name: p.name,
                condition,
            })
            .collect()
    }

    fn within_boundary(&self, state: &M::State) -> bool {
        self.inner.within_boundary(state)
    }
}
