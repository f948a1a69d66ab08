"""The course around grpo_edu: syllabus, four homework sets, their autograders, solutions.

Grade a student's copy of a homework with

    python -m course.grade hw1 path/to/student_hw1.py
"""
