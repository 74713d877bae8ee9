// dlm/core/hooks.hpp — how each policy axis lists its optional hooks in one place.
//
// A required hook missing from a policy fails to compile where the decoder is named. An optional hook
// is called only when the policy has it, so a misspelled one (stop_after_blocks for stop_after_block)
// or one of the wrong signature would silently never run. Each axis's concept.hpp therefore lists its
// optional hooks once: a concept per hook (its exact form, what the loop calls), a call helper (the
// only place the loop asks whether the hook exists), and two checks the decoders static_assert:
//   <axis>_hook_misnamed<P>  — P has a member named like a hook but not one: the known hook's name in
//                              another number or form (stop_after_blocks, align_block, validates, ...);
//   <axis>_hook_mistyped<P>  — P has a member with a hook's name but not its form.
// C++20 cannot list a type's members, so "named like a hook" means the near names each axis lists
// next to its hooks; a member that is overloaded or a template is seen by the form check only.
#pragma once

/// True when T has a data member or a (non-overloaded, non-template) member function called `name`.
#define DLM_HAS_MEMBER_NAMED(T, name) requires { &T::name; }

/// The two static_asserts of one axis, in a decoder named `who` (a string literal), with the
/// known hooks `known` (a string literal) in both messages.
#define DLM_CHECK_OPTIONAL_HOOKS(who, axis, Type, known)                                                                     \
    static_assert(!axis##_hook_misnamed<Type>, who ": the " #axis " policy has a member named like an optional hook but "     \
                                                   "not one (a misspelling is never called); the known " #axis " hooks are " \
                                                   known);                                                                    \
    static_assert(!axis##_hook_mistyped<Type>, who ": the " #axis " policy has an optional hook of another form than the "    \
                                                   "known one (it would never be called); the known " #axis " hooks are " known)
