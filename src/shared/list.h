/* SPDX-License-Identifier: MIT */
#pragma once

/* Intrusive doubly linked lists, in the manner of systemd's list.h. */
#define LIST_FIELDS(t, name) t *name##_next, *name##_prev

#define LIST_PREPEND(name, head, item)                                  \
        do {                                                            \
                typeof(*(head)) **h_ = &(head), *i_ = (item);           \
                if ((i_->name##_next = *h_))                            \
                        i_->name##_next->name##_prev = i_;              \
                i_->name##_prev = NULL;                                 \
                *h_ = i_;                                               \
        } while (0)

#define LIST_REMOVE(name, head, item)                                   \
        do {                                                            \
                typeof(*(head)) **h_ = &(head), *i_ = (item);           \
                if (i_->name##_next)                                    \
                        i_->name##_next->name##_prev = i_->name##_prev; \
                if (i_->name##_prev)                                    \
                        i_->name##_prev->name##_next = i_->name##_next; \
                else                                                    \
                        *h_ = i_->name##_next;                          \
                i_->name##_next = i_->name##_prev = NULL;               \
        } while (0)

#define LIST_FOREACH_SAFE(name, i, n, head) \
        for ((i) = (head); (i) && (((n) = (i)->name##_next), 1); (i) = (n))

#define LIST_FOREACH(name, i, head) \
        for ((i) = (head); (i); (i) = (i)->name##_next)
